//! Checked access to guest memory.
//!
//! A guest pointer is only touched after the caller's address space says
//! the bytes are mapped with the needed access, and then only through the
//! fault-safe copy (or as a [`GuestRange`] handed to the host, which reports
//! its own EFAULT). So a bad pointer gives EFAULT, never a crash of nomu;
//! and a null pointer with length 0 is fine, as on Linux.

use super::space::AddressSpace;
use super::PAGE_SIZE;
use crate::host::physmem::{GuestRange, PhysMem};
use crate::host::pod::{self, Pod};
use crate::host::safecopy;
use crate::kernel::errno::Errno;
use std::sync::Mutex;

/// The top of the x86-64 user address space (47-bit).
pub const TASK_SIZE_MAX: u64 = (1 << 47) - 4096;

/// Linux's access_ok: [addr, addr + len) lies in user space. Says nothing
/// of whether it is mapped; calls that never touch a buffer (/dev/null)
/// check only this.
pub fn access_ok(addr: u64, len: u64) -> bool {
    addr.checked_add(len).is_some_and(|end| end <= TASK_SIZE_MAX)
}

pub struct UserMem<'a> {
    space: &'a Mutex<AddressSpace>,
}

impl<'a> UserMem<'a> {
    pub fn new(space: &'a Mutex<AddressSpace>) -> UserMem<'a> {
        UserMem { space }
    }

    fn prefix(&self, addr: u64, len: usize, write: bool) -> usize {
        self.space.lock().unwrap().accessible_prefix(addr as usize, len, write)
    }

    /// The part of [addr, addr+len) the guest may access, for handing to a
    /// host call (which then returns a partial count, as Linux does).
    /// EFAULT when not even the first byte is accessible.
    pub fn range(&self, addr: u64, len: usize, write: bool) -> Result<GuestRange, Errno> {
        if len == 0 {
            return Ok(GuestRange::new(PhysMem::get().base(), 0).unwrap());
        }
        let ok = self.prefix(addr, len, write);
        if ok == 0 {
            return Err(Errno::EFAULT);
        }
        GuestRange::new(addr as usize, ok).ok_or(Errno::EFAULT)
    }

    /// The whole of [addr, addr+len), or EFAULT.
    pub fn full_range(&self, addr: u64, len: usize, write: bool) -> Result<GuestRange, Errno> {
        let r = self.range(addr, len, write)?;
        if r.len() == len {
            Ok(r)
        } else {
            Err(Errno::EFAULT)
        }
    }

    pub fn read_bytes(&self, addr: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let mut buf = vec![0u8; len];
        self.read_into(addr, &mut buf)?;
        Ok(buf)
    }

    pub fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
        if buf.is_empty() {
            return Ok(());
        }
        if self.prefix(addr, buf.len(), false) != buf.len() {
            return Err(Errno::EFAULT);
        }
        if safecopy::copy_from_guest(buf, addr as usize) != buf.len() {
            return Err(Errno::EFAULT);
        }
        Ok(())
    }

    pub fn read<T: Pod>(&self, addr: u64) -> Result<T, Errno> {
        let mut v = pod::zeroed::<T>();
        self.read_into(addr, pod::as_bytes_mut(&mut v))?;
        Ok(v)
    }

    pub fn write_bytes(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        if data.is_empty() {
            return Ok(());
        }
        if self.prefix(addr, data.len(), true) != data.len() {
            return Err(Errno::EFAULT);
        }
        if safecopy::copy_to_guest(addr as usize, data) != data.len() {
            return Err(Errno::EFAULT);
        }
        Ok(())
    }

    pub fn write<T: Pod>(&self, addr: u64, v: &T) -> Result<(), Errno> {
        self.write_bytes(addr, pod::as_bytes(v))
    }

    /// Reads a NUL-terminated string of at most `max` bytes (without the
    /// NUL). ENAMETOOLONG when no NUL comes within `max` bytes; EFAULT when
    /// the string runs into memory the guest cannot read.
    pub fn read_cstring(&self, addr: u64, max: usize) -> Result<Vec<u8>, Errno> {
        // Most strings are short: copy in small chunks (never across a page
        // boundary, where the next page may be unmapped) until the NUL.
        let mut out = Vec::new();
        let mut chunk = [0u8; 256];
        let mut at = addr;
        loop {
            let to_page_end = PAGE_SIZE - (at as usize % PAGE_SIZE);
            let want = to_page_end.min(chunk.len()).min(max + 1 - out.len());
            let buf = &mut chunk[..want];
            self.read_into(at, buf)?;
            if let Some(nul) = buf.iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..nul]);
                return Ok(out);
            }
            out.extend_from_slice(buf);
            if out.len() > max {
                return Err(Errno::ENAMETOOLONG);
            }
            at += want as u64;
        }
    }
}
