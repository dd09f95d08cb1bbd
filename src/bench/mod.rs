//! `nomu bench`: the syscall benchmark, natively and under nomu.
pub fn main(_args: &[std::ffi::OsString]) -> i32 {
    eprintln!("nomu bench: not built yet");
    1
}
