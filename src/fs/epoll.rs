//! An epoll instance: interest in files, keyed as Linux keys it by (guest
//! descriptor number, open file description), so two dup'ed descriptors can
//! both be added, and an entry goes away when its description's last
//! descriptor is closed ([`OpenFile`]'s drop calls [`Epoll::forget`], as
//! Linux's file release calls eventpoll_release).
//!
//! How one epoll_wait waits on nomu's own files and host descriptors at
//! once: every guest epoll is a host epoll instance (the description's
//! host descriptor) plus nomu's own ready list.
//!
//! - A host file (pipe, terminal, socket, timerfd, another epoll) is
//!   registered in the host epoll with the guest's events, so the host
//!   does level and edge triggering, EPOLLONESHOT and EPOLLEXCLUSIVE for
//!   it exactly. The host keys by (host descriptor, file) and dup'ed guest
//!   descriptors share one host descriptor, so a second registration of
//!   one description goes to a second host epoll, a *layer*, itself
//!   registered in the first; duplicates are rare, so that is where the
//!   cost goes.
//! - A nomu file (eventfd, signalfd) has a wait queue (kernel::poll::
//!   PollHead); its item watches it and, when woken, puts itself on the
//!   ready list, as Linux's ep_poll_callback does. epoll_wait polls the
//!   items on that list (ep_send_events): ready ones are reported, level-
//!   triggered ones queued again, one-shot ones disabled.
//! - A *doorbell*, a host eventfd in the host epoll, is readable exactly
//!   while the ready list is not empty (rung when the list gains its first
//!   item, drained when a scan empties it, both under the list's lock). So
//!   the host epoll is readable whenever anything is ready, and
//!   epoll_wait blocks in one host call (epoll_pwait2, made through
//!   host::blocking: a signal's kick ends it) that either kind ends. The
//!   same makes the epoll descriptor itself a host file for poll, select
//!   and an outer epoll (nested epoll is the host's, loops and depth
//!   checked by it); before asking the host, nomu settles the ready list
//!   ([`Epoll::settle`], Linux's __ep_eventpoll_poll drops items that are
//!   no longer ready the same way) so a stale item does not show.
//!
//! The alternative, a host-side thread or a timed poll over nomu's files,
//! would need a wait that is not a notify or a kick; this needs one host
//! write per empty-to-ready transition and one read per drain.

use super::file::OpenFile;
use crate::abi::errno::Errno;
use crate::host::events as hostev;
use crate::kernel::poll::{PollHead, Wakeup};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

pub const EPOLLIN: u32 = 0x001;
pub const EPOLLOUT: u32 = 0x004;
pub const EPOLLERR: u32 = 0x008;
pub const EPOLLHUP: u32 = 0x010;
pub const EPOLLEXCLUSIVE: u32 = 1 << 28;
pub const EPOLLWAKEUP: u32 = 1 << 29;
pub const EPOLLONESHOT: u32 = 1 << 30;
pub const EPOLLET: u32 = 1 << 31;
/// The mode bits, never reported (EP_PRIVATE_BITS).
pub const PRIVATE_BITS: u32 = EPOLLWAKEUP | EPOLLONESHOT | EPOLLET | EPOLLEXCLUSIVE;
/// What an EPOLLEXCLUSIVE interest may carry (EPOLLEXCLUSIVE_OK_BITS).
pub const EXCLUSIVE_OK_BITS: u32 = EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | EPOLLEXCLUSIVE;

pub const EPOLL_CTL_ADD: i32 = 1;
pub const EPOLL_CTL_DEL: i32 = 2;
pub const EPOLL_CTL_MOD: i32 = 3;

/// Host epoll data nomu keeps for itself; item ids count up from 0.
const DOORBELL: u64 = u64::MAX;
const LAYER_BASE: u64 = 1 << 63;

/// Where a file's readiness comes from, for an item.
pub enum Target<'a> {
    /// The host's: its host descriptor.
    Host(BorrowedFd<'a>),
    /// nomu's: this wait queue, notified when it may have changed.
    Nomu(Arc<PollHead>),
}

enum Place {
    /// Registered in host layer k (0: the epoll's own host descriptor).
    Host {
        layer: usize,
    },
    Nomu {
        head: Arc<PollHead>,
    },
}

/// One interest: Linux's epitem.
pub struct Item {
    id: u64,
    fd: i32,
    file: Weak<OpenFile>,
    /// The events asked for (with EPOLLERR, EPOLLHUP and the mode bits),
    /// and the guest's data.
    interest: Mutex<(u32, u64)>,
    place: Place,
    /// On the ready list (changed under the list's lock).
    queued: AtomicBool,
    removed: AtomicBool,
    epoll: Weak<Epoll>,
    me: Weak<Item>,
}

impl Item {
    pub fn file(&self) -> Option<Arc<OpenFile>> {
        self.file.upgrade()
    }

    pub fn data(&self) -> u64 {
        self.interest.lock().unwrap().1
    }
}

impl Wakeup for Item {
    fn wake(&self) {
        if let (Some(ep), Some(me)) = (self.epoll.upgrade(), self.me.upgrade()) {
            ep.queue(&me);
        }
    }
}

#[derive(Default)]
struct Items {
    /// By (file, guest descriptor): the key, and a file's items together.
    by_file: BTreeMap<(usize, i32), Arc<Item>>,
    by_id: HashMap<u64, Arc<Item>>,
    next_id: u64,
}

#[derive(Default)]
struct Ready {
    list: VecDeque<Arc<Item>>,
    /// The doorbell holds a count (exactly while `list` is not empty).
    rung: bool,
}

/// What the host epoll reported, by its data.
pub enum Reported {
    /// The doorbell: nomu's ready list has items.
    Doorbell,
    /// A layer has events of its own (fetch them with layer_events).
    Layer(usize),
    Item(Arc<Item>),
    /// An item deleted meanwhile.
    Gone,
}

/// A guest epoll instance (see the module comment). Lock order: `scan`,
/// then `items`, then a file's own state (an eventfd's counter, a
/// thread's state: a signalfd's poll), then a wait queue's watchers, then
/// `ready`. A notify (under a file's state) only takes the last two.
pub struct Epoll {
    /// The host epoll (the guest's descriptor is a dup of it).
    main: OwnedFd,
    doorbell: OwnedFd,
    /// Host epolls for second registrations of one file (layer k at k-1).
    layers: Mutex<Vec<OwnedFd>>,
    items: Mutex<Items>,
    ready: Mutex<Ready>,
    /// Serializes scans of the ready list (Linux's ep->mtx).
    scan: Mutex<()>,
    me: Weak<Epoll>,
}

fn file_key(file: &Arc<OpenFile>) -> usize {
    Arc::as_ptr(file) as usize
}

impl Epoll {
    /// A new epoll instance, and the host descriptor for its description (a
    /// dup of its host epoll: the epoll itself outlives it briefly when a
    /// wake-up holds it).
    pub fn new() -> Result<(Arc<Epoll>, OwnedFd), Errno> {
        let main = hostev::epoll_create()?;
        let doorbell = hostev::eventfd(0, libc::EFD_NONBLOCK)?;
        hostev::epoll_ctl(main.as_fd(), EPOLL_CTL_ADD, doorbell.as_fd(), Some((EPOLLIN, DOORBELL)))?;
        let host = crate::host::fs::dup(main.as_fd())?;
        let ep = Arc::new_cyclic(|me| Epoll {
            main,
            doorbell,
            layers: Mutex::new(Vec::new()),
            items: Mutex::new(Items::default()),
            ready: Mutex::new(Ready::default()),
            scan: Mutex::new(()),
            me: me.clone(),
        });
        Ok((ep, host))
    }

    fn ring(&self, r: &mut Ready) {
        if !r.rung {
            r.rung = true;
            let _ = hostev::eventfd_add(self.doorbell.as_fd(), 1);
        }
    }

    /// Makes the doorbell say whether the list has items.
    fn settle_bell(&self, r: &mut Ready) {
        if !r.list.is_empty() {
            self.ring(r);
        } else if r.rung {
            r.rung = false;
            let _ = hostev::eventfd_take(self.doorbell.as_fd());
        }
    }

    /// Puts `item` on the ready list (ep_poll_callback).
    fn queue(&self, item: &Arc<Item>) {
        let mut r = self.ready.lock().unwrap();
        if item.removed.load(Ordering::SeqCst) || item.queued.swap(true, Ordering::SeqCst) {
            return;
        }
        r.list.push_back(item.clone());
        self.ring(&mut r);
    }

    /// Puts back items a scan took, `first` at the front, then the ones
    /// queued during the scan, then `last` (as ep_done_scan orders them).
    fn requeue(&self, first: impl IntoIterator<Item = Arc<Item>>, last: Vec<Arc<Item>>) {
        let mut r = self.ready.lock().unwrap();
        let woken = std::mem::take(&mut r.list);
        let mut list = VecDeque::new();
        for item in first.into_iter().chain(last) {
            if !item.removed.load(Ordering::SeqCst) && !item.queued.swap(true, Ordering::SeqCst) {
                list.push_back(item);
            }
        }
        list.extend(woken);
        r.list = list;
        self.settle_bell(&mut r);
    }

    /// Takes the ready list for a scan.
    fn take_ready(&self) -> VecDeque<Arc<Item>> {
        let mut r = self.ready.lock().unwrap();
        let list = std::mem::take(&mut r.list);
        for item in &list {
            item.queued.store(false, Ordering::SeqCst);
        }
        list
    }

    /// The item for (`fd`, `file`), if any.
    fn find(&self, fd: i32, file: &Arc<OpenFile>) -> Option<Arc<Item>> {
        self.items.lock().unwrap().by_file.get(&(file_key(file), fd)).cloned()
    }

    /// The host epoll of layer `k`, made when first needed.
    fn with_layer<T>(&self, k: usize, f: impl FnOnce(BorrowedFd) -> T) -> Result<T, Errno> {
        let main = self.main.as_fd();
        if k == 0 {
            return Ok(f(main));
        }
        let mut layers = self.layers.lock().unwrap();
        while layers.len() < k {
            let layer = hostev::epoll_create()?;
            let id = LAYER_BASE + layers.len() as u64 + 1;
            hostev::epoll_ctl(main, EPOLL_CTL_ADD, layer.as_fd(), Some((EPOLLIN, id)))?;
            layers.push(layer);
        }
        Ok(f(layers[k - 1].as_fd()))
    }

    /// EPOLL_CTL_ADD of (`fd`, `file`) with `events` (EPOLLERR and EPOLLHUP
    /// added here) and `data`. `poll` tells whether a nomu file is ready
    /// now (then it goes on the ready list at once, as ep_insert does).
    pub fn add(
        &self,
        fd: i32,
        file: &Arc<OpenFile>,
        target: Target,
        events: u32,
        data: u64,
        poll: impl FnOnce() -> u32,
    ) -> Result<(), Errno> {
        let events = events | EPOLLERR | EPOLLHUP;
        let mut items = self.items.lock().unwrap();
        let key = (file_key(file), fd);
        if items.by_file.contains_key(&key) {
            return Err(Errno::EEXIST);
        }
        let id = items.next_id;
        let place = match &target {
            Target::Host(host) => {
                // The first layer where this file is not registered yet.
                let taken: Vec<usize> = items
                    .by_file
                    .range((key.0, i32::MIN)..=(key.0, i32::MAX))
                    .filter_map(|(_, i)| match i.place {
                        Place::Host { layer } => Some(layer),
                        Place::Nomu { .. } => None,
                    })
                    .collect();
                let layer = (0..).find(|k| !taken.contains(k)).unwrap();
                self.with_layer(layer, |ep| hostev::epoll_ctl(ep, EPOLL_CTL_ADD, *host, Some((events, id))))??;
                Place::Host { layer }
            }
            Target::Nomu(head) => Place::Nomu { head: head.clone() },
        };
        items.next_id += 1;
        let item = Arc::new_cyclic(|me| Item {
            id,
            fd,
            file: Arc::downgrade(file),
            interest: Mutex::new((events, data)),
            place,
            queued: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            epoll: self.me.clone(),
            me: me.clone(),
        });
        items.by_file.insert(key, item.clone());
        items.by_id.insert(id, item.clone());
        file.epoll_added(self.me.clone(), id);
        if let Place::Nomu { head } = &item.place {
            let me: Weak<dyn Wakeup> = item.me.clone();
            head.watch(me);
            if poll() & events != 0 {
                self.queue(&item);
            }
        }
        Ok(())
    }

    /// EPOLL_CTL_MOD: ENOENT without an item; EINVAL for an exclusive one.
    pub fn modify(
        &self,
        fd: i32,
        file: &Arc<OpenFile>,
        events: u32,
        data: u64,
        poll: impl FnOnce() -> u32,
    ) -> Result<(), Errno> {
        let _items = self.items.lock().unwrap();
        let item = _items.by_file.get(&(file_key(file), fd)).cloned().ok_or(Errno::ENOENT)?;
        let mut interest = item.interest.lock().unwrap();
        if interest.0 & EPOLLEXCLUSIVE != 0 {
            return Err(Errno::EINVAL);
        }
        let events = events | EPOLLERR | EPOLLHUP;
        if let Place::Host { layer } = item.place {
            let host = file.fd();
            self.with_layer(layer, |ep| hostev::epoll_ctl(ep, EPOLL_CTL_MOD, host, Some((events, item.id))))??;
        }
        *interest = (events, data);
        drop(interest);
        if matches!(item.place, Place::Nomu { .. }) && poll() & events != 0 {
            self.queue(&item);
        }
        Ok(())
    }

    /// EPOLL_CTL_DEL: ENOENT without an item.
    pub fn delete(&self, fd: i32, file: &Arc<OpenFile>) -> Result<(), Errno> {
        let item = self.find(fd, file).ok_or(Errno::ENOENT)?;
        self.remove(&item, file.fd());
        file.epoll_removed(&self.me, item.id);
        Ok(())
    }

    /// Drops an item: from the maps, the host or its wait queue, the list.
    fn remove(&self, item: &Arc<Item>, host: BorrowedFd) {
        {
            let mut items = self.items.lock().unwrap();
            if items.by_id.remove(&item.id).is_none() {
                return;
            }
            items.by_file.remove(&(item.file.as_ptr() as usize, item.fd));
        }
        item.removed.store(true, Ordering::SeqCst);
        match &item.place {
            Place::Host { layer } => {
                let _ = self.with_layer(*layer, |ep| hostev::epoll_ctl(ep, EPOLL_CTL_DEL, host, None));
            }
            Place::Nomu { head } => {
                let me: Weak<dyn Wakeup> = item.me.clone();
                head.unwatch(&me);
            }
        }
        let mut r = self.ready.lock().unwrap();
        r.list.retain(|i| !Arc::ptr_eq(i, item));
        self.settle_bell(&mut r);
    }

    /// The file of item `id` is going away (its last descriptor closed):
    /// its interest goes too. `host` is its host descriptor, still open.
    pub fn forget(&self, id: u64, host: BorrowedFd) {
        let item = self.items.lock().unwrap().by_id.get(&id).cloned();
        if let Some(item) = item {
            self.remove(&item, host);
        }
    }

    /// Reports ready nomu items, as Linux's ep_send_events: each item on
    /// the ready list is polled (`poll`, by its file) and, if ready, passed
    /// to `emit` (events, data), at most `max`; level-triggered items are
    /// queued again, one-shot ones disabled until EPOLL_CTL_MOD. When
    /// `emit` fails (the guest's buffer faulted) the item goes back and the
    /// scan stops. Returns how many were emitted.
    pub fn harvest(
        &self,
        max: usize,
        poll: &mut dyn FnMut(&OpenFile) -> u32,
        emit: &mut dyn FnMut(u32, u64) -> bool,
    ) -> usize {
        let _scan = self.scan.lock().unwrap();
        let mut taken = self.take_ready();
        let mut again = Vec::new();
        let mut n = 0;
        while let Some(item) = taken.pop_front() {
            if n >= max {
                taken.push_front(item);
                break;
            }
            if item.removed.load(Ordering::SeqCst) {
                continue;
            }
            let Some(file) = item.file.upgrade() else { continue };
            let (events, data) = *item.interest.lock().unwrap();
            let revents = poll(&file) & events;
            // Dropped here, not under a lock: it may be the last reference.
            drop(file);
            if revents == 0 {
                continue;
            }
            if !emit(revents, data) {
                taken.push_front(item);
                break;
            }
            n += 1;
            if events & EPOLLONESHOT != 0 {
                item.interest.lock().unwrap().0 &= PRIVATE_BITS;
            } else if events & EPOLLET == 0 {
                again.push(item);
            }
        }
        self.requeue(taken, again);
        n
    }

    /// Drops from the ready list the items that are not ready (as Linux's
    /// poll of an epoll file does), so the doorbell, and with it the host
    /// epoll's readiness, says whether one is. Returns whether one is.
    pub fn settle(&self, poll: &mut dyn FnMut(&OpenFile) -> u32) -> bool {
        let _scan = self.scan.lock().unwrap();
        let mut keep = Vec::new();
        for item in self.take_ready() {
            if item.removed.load(Ordering::SeqCst) {
                continue;
            }
            let Some(file) = item.file.upgrade() else { continue };
            let events = item.interest.lock().unwrap().0;
            let ready = poll(&file) & events != 0;
            drop(file);
            if ready {
                keep.push(item);
            }
        }
        self.requeue(keep, Vec::new());
        !self.ready.lock().unwrap().list.is_empty()
    }

    /// What the host epoll reported with `data`.
    pub fn reported(&self, data: u64) -> Reported {
        if data == DOORBELL {
            return Reported::Doorbell;
        }
        if data > LAYER_BASE {
            return Reported::Layer((data - LAYER_BASE) as usize);
        }
        match self.items.lock().unwrap().by_id.get(&data) {
            Some(item) => Reported::Item(item.clone()),
            None => Reported::Gone,
        }
    }

    /// The host epoll, to wait on.
    pub fn host(&self) -> BorrowedFd<'_> {
        self.main.as_fd()
    }

    /// The events layer `k` holds, without waiting.
    pub fn layer_events(&self, k: usize, buf: &mut [libc::epoll_event]) -> usize {
        let layers = self.layers.lock().unwrap();
        match layers.get(k.wrapping_sub(1)) {
            Some(layer) => hostev::epoll_wait(layer.as_fd(), buf, Some(std::time::Duration::ZERO)).unwrap_or(0),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_doorbell_rings_while_the_ready_list_has_items() {
        let (ep, _host) = Epoll::new().unwrap();
        let main = ep.host();
        let bell_rung = |ep: &Epoll| {
            let mut buf = [libc::epoll_event { events: 0, u64: 0 }];
            hostev::epoll_wait(main, &mut buf, Some(std::time::Duration::ZERO)).unwrap() == 1 && {
                let d = buf[0].u64;
                d == DOORBELL && ep.ready.lock().unwrap().rung
            }
        };
        assert!(!bell_rung(&ep));
        let file = Arc::new(OpenFile::new(hostev::eventfd(0, 0).unwrap(), b"t".to_vec(), false));
        let head = PollHead::new();
        ep.add(3, &file, Target::Nomu(head.clone()), EPOLLIN, 7, || 0).unwrap();
        assert_eq!(ep.add(3, &file, Target::Nomu(head.clone()), EPOLLIN, 7, || 0), Err(Errno::EEXIST));
        assert!(!bell_rung(&ep));
        head.notify();
        assert!(bell_rung(&ep));
        // Not ready when polled: dropped, and the bell drained.
        let mut emitted = Vec::new();
        assert_eq!(
            ep.harvest(8, &mut |_| 0, &mut |e, d| {
                emitted.push((e, d));
                true
            }),
            0
        );
        assert!(!bell_rung(&ep));
        // Level-triggered: reported, and queued again.
        head.notify();
        assert_eq!(
            ep.harvest(8, &mut |_| EPOLLIN, &mut |e, d| {
                emitted.push((e, d));
                true
            }),
            1
        );
        assert_eq!(emitted, [(EPOLLIN, 7)]);
        assert!(bell_rung(&ep));
        assert!(!ep.settle(&mut |_| 0));
        assert!(!bell_rung(&ep));
        // The file going away takes its interest with it.
        drop(file);
        head.notify();
        assert!(!bell_rung(&ep));
        assert!(ep.items.lock().unwrap().by_id.is_empty());
    }
}
