//! Credentials: user and group ids, supplementary groups and capabilities,
//! with Linux's rules for changing them (kernel/sys.c, kernel/groups.c,
//! kernel/capability.c, security/commoncap.c).
//!
//! Each guest thread has its own, as each Linux task has (libc applies a
//! setuid to every thread; a raw syscall changes its caller only). They
//! start as nomu's own, are copied to new threads and processes, and are
//! kept across execve, which ignores set-user-id and set-group-id bits (as
//! under no_new_privs). They are the guest's view only: nomu's host
//! credentials never change, so every host permission check stays nomu's.

use crate::abi::errno::Errno;
use std::sync::Arc;

/// "Unchanged" in setreuid and friends; not a valid id anywhere.
pub const NO_ID: u32 = u32::MAX;

/// Linux's NGROUPS_MAX.
pub const NGROUPS_MAX: usize = 65536;

pub const CAP_CHOWN: u32 = 0;
pub const CAP_DAC_OVERRIDE: u32 = 1;
pub const CAP_DAC_READ_SEARCH: u32 = 2;
pub const CAP_FOWNER: u32 = 3;
pub const CAP_FSETID: u32 = 4;
pub const CAP_KILL: u32 = 5;
pub const CAP_SETGID: u32 = 6;
pub const CAP_SETUID: u32 = 7;
pub const CAP_SETPCAP: u32 = 8;
pub const CAP_LINUX_IMMUTABLE: u32 = 9;
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_SYS_NICE: u32 = 23;
pub const CAP_SYS_RESOURCE: u32 = 24;
pub const CAP_MKNOD: u32 = 27;
pub const CAP_MAC_OVERRIDE: u32 = 32;
/// CAP_CHECKPOINT_RESTORE, the last one Linux knows.
pub const CAP_LAST_CAP: u32 = 40;
/// Every capability Linux knows.
pub const CAP_VALID_MASK: u64 = (1 << (CAP_LAST_CAP + 1)) - 1;

/// The capabilities that follow the fs uid (CAP_FS_SET).
const CAP_FS_SET: u64 = 1 << CAP_CHOWN
    | 1 << CAP_MKNOD
    | 1 << CAP_DAC_OVERRIDE
    | 1 << CAP_DAC_READ_SEARCH
    | 1 << CAP_FOWNER
    | 1 << CAP_FSETID
    | 1 << CAP_LINUX_IMMUTABLE
    | 1 << CAP_MAC_OVERRIDE;

/// One thread's credentials (Linux's struct cred).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cred {
    pub uid: u32,
    pub euid: u32,
    pub suid: u32,
    pub fsuid: u32,
    pub gid: u32,
    pub egid: u32,
    pub sgid: u32,
    pub fsgid: u32,
    /// Supplementary groups, sorted (as set_groups keeps them).
    pub groups: Arc<[u32]>,
    pub cap_effective: u64,
    pub cap_permitted: u64,
    pub cap_inheritable: u64,
    pub cap_bset: u64,
    /// The ambient set: kept across execve of a program without file
    /// capabilities (always inside permitted and inheritable).
    pub cap_ambient: u64,
    /// SECBIT_KEEP_CAPS (PR_SET_KEEPCAPS): capabilities survive leaving uid 0.
    pub keep_caps: bool,
}

impl Cred {
    /// The first guest's: nomu's own.
    pub fn of_host() -> Cred {
        let h = crate::host::sys::host_cred();
        let mut groups = h.groups.clone();
        groups.sort_unstable();
        Cred {
            uid: h.uids[0],
            euid: h.uids[1],
            suid: h.uids[2],
            fsuid: h.uids[1],
            gid: h.gids[0],
            egid: h.gids[1],
            sgid: h.gids[2],
            fsgid: h.gids[1],
            groups: groups.into(),
            cap_effective: h.caps[0] & CAP_VALID_MASK,
            cap_permitted: h.caps[1] & CAP_VALID_MASK,
            cap_inheritable: h.caps[2] & CAP_VALID_MASK,
            cap_bset: h.bset & CAP_VALID_MASK,
            cap_ambient: h.ambient & CAP_VALID_MASK,
            keep_caps: false,
        }
    }

    /// The ids a new program's auxiliary vector tells it.
    pub fn aux_ids(&self) -> crate::loader::AuxIds {
        // Linux's secureexec: the effective ids are not the real ones.
        let secure = self.euid != self.uid || self.egid != self.gid;
        crate::loader::AuxIds { uid: self.uid, euid: self.euid, gid: self.gid, egid: self.egid, secure }
    }

    /// Whether the effective set holds `cap` (Linux's capable()).
    pub fn capable(&self, cap: u32) -> bool {
        self.cap_effective & (1 << cap) != 0
    }

    /// Whether `gid` is the fs gid or a supplementary group (in_group_p).
    pub fn in_group(&self, gid: u32) -> bool {
        self.fsgid == gid || self.groups.binary_search(&gid).is_ok()
    }

    /// The credentials access(2) checks with (access_override_creds): the
    /// real ids as fs ids, and no capabilities unless the real uid is 0
    /// (then the permitted set).
    pub fn for_access(&self) -> Cred {
        let mut c = self.clone();
        (c.fsuid, c.fsgid) = (c.uid, c.gid);
        c.cap_effective = if c.uid == 0 { c.cap_permitted } else { 0 };
        c
    }

    /// setuid(2).
    pub fn setuid(&self, uid: u32) -> Result<Cred, Errno> {
        if uid == NO_ID {
            return Err(Errno::EINVAL);
        }
        let mut new = self.clone();
        if self.capable(CAP_SETUID) {
            new.uid = uid;
            new.suid = uid;
        } else if uid != self.uid && uid != self.suid {
            return Err(Errno::EPERM);
        }
        new.euid = uid;
        new.fsuid = uid;
        new.fix_setxuid(self);
        Ok(new)
    }

    /// setreuid(2).
    pub fn setreuid(&self, ruid: u32, euid: u32) -> Result<Cred, Errno> {
        let mut new = self.clone();
        let may = self.capable(CAP_SETUID);
        if ruid != NO_ID {
            if ruid != self.uid && ruid != self.euid && !may {
                return Err(Errno::EPERM);
            }
            new.uid = ruid;
        }
        if euid != NO_ID {
            if euid != self.uid && euid != self.euid && euid != self.suid && !may {
                return Err(Errno::EPERM);
            }
            new.euid = euid;
        }
        if ruid != NO_ID || (euid != NO_ID && euid != self.uid) {
            new.suid = new.euid;
        }
        new.fsuid = new.euid;
        new.fix_setxuid(self);
        Ok(new)
    }

    /// setresuid(2).
    pub fn setresuid(&self, ruid: u32, euid: u32, suid: u32) -> Result<Cred, Errno> {
        let noop = (ruid == NO_ID || ruid == self.uid)
            && (euid == NO_ID || (euid == self.euid && euid == self.fsuid))
            && (suid == NO_ID || suid == self.suid);
        if noop {
            return Ok(self.clone());
        }
        let new_id = |id: u32| id != NO_ID && id != self.uid && id != self.euid && id != self.suid;
        if (new_id(ruid) || new_id(euid) || new_id(suid)) && !self.capable(CAP_SETUID) {
            return Err(Errno::EPERM);
        }
        let mut new = self.clone();
        if ruid != NO_ID {
            new.uid = ruid;
        }
        if euid != NO_ID {
            new.euid = euid;
        }
        if suid != NO_ID {
            new.suid = suid;
        }
        new.fsuid = new.euid;
        new.fix_setxuid(self);
        Ok(new)
    }

    /// setfsuid(2): the new credentials, if they change.
    pub fn setfsuid(&self, uid: u32) -> Option<Cred> {
        if uid == NO_ID || uid == self.fsuid {
            return None;
        }
        let known = [self.uid, self.euid, self.suid].contains(&uid);
        if !known && !self.capable(CAP_SETUID) {
            return None;
        }
        let mut new = self.clone();
        new.fsuid = uid;
        // cap_task_fix_setuid, LSM_SETID_FS.
        if self.fsuid == 0 && uid != 0 {
            new.cap_effective &= !CAP_FS_SET;
        }
        if self.fsuid != 0 && uid == 0 {
            new.cap_effective |= new.cap_permitted & CAP_FS_SET;
        }
        Some(new)
    }

    /// setgid(2).
    pub fn setgid(&self, gid: u32) -> Result<Cred, Errno> {
        if gid == NO_ID {
            return Err(Errno::EINVAL);
        }
        let mut new = self.clone();
        if self.capable(CAP_SETGID) {
            new.gid = gid;
            new.sgid = gid;
        } else if gid != self.gid && gid != self.sgid {
            return Err(Errno::EPERM);
        }
        new.egid = gid;
        new.fsgid = gid;
        Ok(new)
    }

    /// setregid(2).
    pub fn setregid(&self, rgid: u32, egid: u32) -> Result<Cred, Errno> {
        let mut new = self.clone();
        let may = self.capable(CAP_SETGID);
        if rgid != NO_ID {
            if rgid != self.gid && rgid != self.egid && !may {
                return Err(Errno::EPERM);
            }
            new.gid = rgid;
        }
        if egid != NO_ID {
            if egid != self.gid && egid != self.egid && egid != self.sgid && !may {
                return Err(Errno::EPERM);
            }
            new.egid = egid;
        }
        if rgid != NO_ID || (egid != NO_ID && egid != self.gid) {
            new.sgid = new.egid;
        }
        new.fsgid = new.egid;
        Ok(new)
    }

    /// setresgid(2).
    pub fn setresgid(&self, rgid: u32, egid: u32, sgid: u32) -> Result<Cred, Errno> {
        let noop = (rgid == NO_ID || rgid == self.gid)
            && (egid == NO_ID || (egid == self.egid && egid == self.fsgid))
            && (sgid == NO_ID || sgid == self.sgid);
        if noop {
            return Ok(self.clone());
        }
        let new_id = |id: u32| id != NO_ID && id != self.gid && id != self.egid && id != self.sgid;
        if (new_id(rgid) || new_id(egid) || new_id(sgid)) && !self.capable(CAP_SETGID) {
            return Err(Errno::EPERM);
        }
        let mut new = self.clone();
        if rgid != NO_ID {
            new.gid = rgid;
        }
        if egid != NO_ID {
            new.egid = egid;
        }
        if sgid != NO_ID {
            new.sgid = sgid;
        }
        new.fsgid = new.egid;
        Ok(new)
    }

    /// setfsgid(2): the new credentials, if they change.
    pub fn setfsgid(&self, gid: u32) -> Option<Cred> {
        if gid == NO_ID || gid == self.fsgid {
            return None;
        }
        let known = [self.gid, self.egid, self.sgid].contains(&gid);
        if !known && !self.capable(CAP_SETGID) {
            return None;
        }
        let mut new = self.clone();
        new.fsgid = gid;
        Some(new)
    }

    /// setgroups(2), once the list is read: needs CAP_SETGID.
    pub fn setgroups(&self, mut groups: Vec<u32>) -> Result<Cred, Errno> {
        if !self.capable(CAP_SETGID) {
            return Err(Errno::EPERM);
        }
        groups.sort_unstable();
        Ok(Cred { groups: groups.into(), ..self.clone() })
    }

    /// capset(2) on oneself (cap_capset): the sets may only shrink, the
    /// inheritable one grow only with CAP_SETPCAP and inside the bounding
    /// set. Bits Linux does not know are dropped.
    pub fn capset(&self, effective: u64, permitted: u64, inheritable: u64) -> Result<Cred, Errno> {
        let (e, p, i) = (effective & CAP_VALID_MASK, permitted & CAP_VALID_MASK, inheritable & CAP_VALID_MASK);
        let subset = |a: u64, b: u64| a & !b == 0;
        if !self.capable(CAP_SETPCAP) && !subset(i, self.cap_inheritable | self.cap_permitted) {
            return Err(Errno::EPERM);
        }
        if !subset(i, self.cap_inheritable | self.cap_bset) || !subset(p, self.cap_permitted) || !subset(e, p) {
            return Err(Errno::EPERM);
        }
        let cap_ambient = self.cap_ambient & p & i;
        Ok(Cred { cap_effective: e, cap_permitted: p, cap_inheritable: i, cap_ambient, ..self.clone() })
    }

    /// PR_CAP_AMBIENT_RAISE (`raise`) and _LOWER of one capability.
    pub fn set_ambient(&self, cap: u32, raise: bool) -> Result<Cred, Errno> {
        if cap > CAP_LAST_CAP {
            return Err(Errno::EINVAL);
        }
        let bit = 1 << cap;
        if raise && (self.cap_permitted & bit == 0 || self.cap_inheritable & bit == 0) {
            return Err(Errno::EPERM);
        }
        let cap_ambient = if raise { self.cap_ambient | bit } else { self.cap_ambient & !bit };
        Ok(Cred { cap_ambient, ..self.clone() })
    }

    /// PR_CAPBSET_DROP.
    pub fn drop_bset(&self, cap: u32) -> Result<Cred, Errno> {
        if cap > CAP_LAST_CAP {
            return Err(Errno::EINVAL);
        }
        if !self.capable(CAP_SETPCAP) {
            return Err(Errno::EPERM);
        }
        Ok(Cred { cap_bset: self.cap_bset & !(1 << cap), ..self.clone() })
    }

    /// What execve makes of them, for a program with no set-id bits and
    /// no file capabilities (cap_bprm_creds_from_file): the saved and fs
    /// ids become the effective ones; uid 0 (real or effective) gets the
    /// bounding set and the inheritable one, everyone else the ambient set
    /// only (dropped when the effective ids are not the real ones).
    pub fn for_exec(&self) -> Cred {
        let mut new = self.clone();
        new.suid = new.euid;
        new.fsuid = new.euid;
        new.sgid = new.egid;
        new.fsgid = new.egid;
        if new.euid != new.uid || new.egid != new.gid {
            new.cap_ambient = 0;
        }
        let root = if new.euid == 0 || new.uid == 0 { self.cap_bset | self.cap_inheritable } else { 0 };
        new.cap_permitted = root | new.cap_ambient;
        new.cap_effective = if new.euid == 0 { new.cap_permitted } else { new.cap_ambient };
        new.keep_caps = false;
        new
    }

    /// cap_emulate_setxuid: capabilities follow a change of uids.
    fn fix_setxuid(&mut self, old: &Cred) {
        let had_root = old.uid == 0 || old.euid == 0 || old.suid == 0;
        let has_root = self.uid == 0 || self.euid == 0 || self.suid == 0;
        if had_root && !has_root {
            if !self.keep_caps {
                self.cap_permitted = 0;
                self.cap_effective = 0;
            }
            self.cap_ambient = 0;
        }
        if old.euid == 0 && self.euid != 0 {
            self.cap_effective = 0;
        }
        if old.euid != 0 && self.euid == 0 {
            self.cap_effective = self.cap_permitted;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> Cred {
        Cred {
            uid: 0,
            euid: 0,
            suid: 0,
            fsuid: 0,
            gid: 0,
            egid: 0,
            sgid: 0,
            fsgid: 0,
            groups: Arc::from(vec![0]),
            cap_effective: CAP_VALID_MASK,
            cap_permitted: CAP_VALID_MASK,
            cap_inheritable: 0,
            cap_bset: CAP_VALID_MASK,
            cap_ambient: 0,
            keep_caps: false,
        }
    }

    fn ids(c: &Cred) -> [u32; 4] {
        [c.uid, c.euid, c.suid, c.fsuid]
    }

    #[test]
    fn root_drops_everything_with_setuid() {
        let c = root().setuid(1000).unwrap();
        assert_eq!(ids(&c), [1000; 4]);
        assert_eq!((c.cap_effective, c.cap_permitted), (0, 0));
        assert_eq!(c.setuid(0), Err(Errno::EPERM));
        assert_eq!(c.setuid(NO_ID), Err(Errno::EINVAL));
    }

    #[test]
    fn a_saved_root_comes_back() {
        let c = root().setresuid(NO_ID, 1000, NO_ID).unwrap();
        assert_eq!(ids(&c), [0, 1000, 0, 1000]);
        assert_eq!(c.cap_effective, 0);
        assert_eq!(c.cap_permitted, CAP_VALID_MASK);
        let back = c.setresuid(NO_ID, 0, NO_ID).unwrap();
        assert_eq!(back.cap_effective, CAP_VALID_MASK);
        // Unprivileged: only ids it holds.
        assert_eq!(c.setresuid(2000, NO_ID, NO_ID), Err(Errno::EPERM));
    }

    #[test]
    fn setreuid_sets_the_saved_id_as_linux_does() {
        let c = root().setresuid(1, 2, 3).unwrap();
        // Swapping real and effective: the saved id becomes the new effective.
        let s = c.setreuid(2, 1).unwrap();
        assert_eq!(ids(&s), [2, 1, 1, 1]);
        // Only the effective, set to the real: the saved id stays.
        let s = c.setreuid(NO_ID, 1).unwrap();
        assert_eq!(ids(&s), [1, 1, 3, 1]);
        assert_eq!(c.setreuid(4, NO_ID), Err(Errno::EPERM));
    }

    #[test]
    fn keep_caps_keeps_the_permitted_set() {
        let mut r = root();
        r.keep_caps = true;
        let c = r.setresuid(1000, 1000, 1000).unwrap();
        assert_eq!((c.cap_effective, c.cap_permitted), (0, CAP_VALID_MASK));
        assert_eq!(c.for_exec().cap_permitted, 0);
    }

    #[test]
    fn fsuid_changes_drop_and_raise_the_fs_capabilities() {
        let c = root().setfsuid(1000).unwrap();
        assert_eq!(c.cap_effective, CAP_VALID_MASK & !CAP_FS_SET);
        assert_eq!(c.setfsuid(0).unwrap().cap_effective, CAP_VALID_MASK);
        let u = root().setuid(1000).unwrap();
        assert_eq!(u.setfsuid(5), None);
        assert_eq!(u.setfsuid(NO_ID), None);
    }

    #[test]
    fn groups_need_cap_setgid_and_come_back_sorted() {
        let c = root().setgroups(vec![5, 3, 4]).unwrap();
        assert_eq!(&*c.groups, &[3, 4, 5]);
        let u = c.setresgid(7, 7, 7).unwrap().setuid(7).unwrap();
        assert_eq!(u.setgroups(vec![]), Err(Errno::EPERM));
        assert_eq!(&*u.groups, &[3, 4, 5]);
    }

    #[test]
    fn capset_only_shrinks() {
        let r = root();
        let c = r.capset(0, 1 << CAP_SETUID, 0).unwrap();
        assert_eq!(c.capset(0, 1 << CAP_SETGID, 0), Err(Errno::EPERM));
        assert_eq!(r.capset(1 << CAP_SETUID, 0, 0), Err(Errno::EPERM));
        // Without CAP_SETPCAP the inheritable set stays inside the permitted.
        assert_eq!(c.capset(0, 1 << CAP_SETUID, 1 << CAP_CHOWN), Err(Errno::EPERM));
        assert!(c.capset(0, 1 << CAP_SETUID, 1 << CAP_SETUID).is_ok());
    }

    #[test]
    fn ambient_capabilities_survive_exec_as_another_user() {
        let mut r = root();
        r.keep_caps = true;
        let c = r.capset(CAP_VALID_MASK, CAP_VALID_MASK, 1 << CAP_SYS_NICE).unwrap();
        let c = c.set_ambient(CAP_SYS_NICE, true).unwrap();
        assert_eq!(c.set_ambient(CAP_CHOWN, true), Err(Errno::EPERM));
        let u = c.setresuid(1000, 1000, 1000).unwrap();
        // Leaving uid 0 clears the ambient set, keep-caps or not.
        assert_eq!(u.cap_ambient, 0);
        let u = u.set_ambient(CAP_SYS_NICE, true).unwrap().for_exec();
        assert_eq!((u.cap_effective, u.cap_permitted), (1 << CAP_SYS_NICE, 1 << CAP_SYS_NICE));
        // Dropping it from the inheritable set drops it from the ambient one.
        assert_eq!(u.capset(0, u.cap_permitted, 0).unwrap().cap_ambient, 0);
    }

    #[test]
    fn exec_gives_root_its_bounding_set() {
        let mut r = root();
        r.cap_effective = 0;
        r.cap_bset &= !(1 << CAP_SYS_NICE);
        let e = r.for_exec();
        assert_eq!(e.cap_effective, CAP_VALID_MASK & !(1 << CAP_SYS_NICE));
        let ruid_only = root().setresuid(0, 1000, 1000).unwrap().for_exec();
        assert_eq!((ruid_only.cap_effective, ruid_only.cap_permitted), (0, CAP_VALID_MASK));
        assert_eq!(ids(&ruid_only), [0, 1000, 1000, 1000]);
    }
}
