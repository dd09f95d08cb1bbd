//! nomu: a no-MMU user-mode kernel. Runs unmodified x86-64 Linux programs
//! inside this one host process; see README.md.

// The Linux-semantics part of the kernel must not need `unsafe`; only the
// modules that talk to the CPU and the host may use it.
#![deny(unsafe_code)]

mod abi;
mod bench;
mod cli;
#[allow(unsafe_code)]
mod entry;
mod fs;
#[allow(unsafe_code)]
mod host;
mod kernel;
mod loader;
mod mm;
mod sync;
mod syscall;

fn main() {
    std::process::exit(cli::main());
}
