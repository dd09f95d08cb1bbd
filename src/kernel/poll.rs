//! Wait queues of the files nomu serves itself (eventfd, signalfd): what
//! Linux's `wait_queue_head_t` of a file is to poll and epoll.
//!
//! A [`PollHead`] is notified whenever its file's readiness may have
//! changed. Its [`Event`] wakes the threads blocked on the file itself (a
//! read of an empty eventfd waits in `wait_for` on it); its watchers are
//! the waits on many files at once: an epoll item (which queues itself on
//! its epoll's ready list) and a poll/select call ([`PollWaker`]). A
//! watcher is held weakly: one that went away is dropped at the next
//! notify.
//!
//! Host descriptors never come here: their readiness is the host's, and
//! their waits are host calls (poll, epoll_wait). A wait on both kinds at
//! once sleeps in the host call, with a host eventfd of its own in the set
//! (a doorbell) that its watchers ring.

use super::waiter::Event;
use crate::host::events as hostev;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Someone waiting on several files: told when one of them may have
/// become ready. It must not block, nor take a lock that a holder of a
/// file's own lock (an eventfd's counter, a thread's state) may wait for.
pub trait Wakeup: Send + Sync {
    fn wake(&self);
}

#[derive(Default)]
pub struct PollHead {
    /// Notified on every change: threads blocked on this file wait on it.
    pub event: Event,
    watchers: Mutex<Vec<Weak<dyn Wakeup>>>,
    /// How many watchers there are, so that a notify with none (the usual
    /// eventfd write, every signal) takes no lock.
    count: AtomicUsize,
}

impl PollHead {
    pub fn new() -> Arc<PollHead> {
        Arc::new(PollHead::default())
    }

    /// The file's readiness may have changed: wakes whoever waits for it.
    /// The caller changed the state first (under the file's own lock); a
    /// watcher registered before it looked at that state is counted by
    /// then, so either it saw the change or it is woken here.
    pub fn notify(&self) {
        self.event.notify();
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        let live: Vec<Arc<dyn Wakeup>> = {
            let mut watchers = self.watchers.lock().unwrap();
            watchers.retain(|w| w.strong_count() > 0);
            self.count.store(watchers.len(), Ordering::SeqCst);
            watchers.iter().filter_map(Weak::upgrade).collect()
        };
        for w in live {
            w.wake();
        }
    }

    /// Adds a watcher, woken by every notify until removed or dropped.
    pub fn watch(&self, w: Weak<dyn Wakeup>) {
        let mut watchers = self.watchers.lock().unwrap();
        watchers.retain(|w| w.strong_count() > 0);
        watchers.push(w);
        self.count.store(watchers.len(), Ordering::SeqCst);
    }

    pub fn unwatch(&self, w: &Weak<dyn Wakeup>) {
        let mut watchers = self.watchers.lock().unwrap();
        watchers.retain(|x| x.strong_count() > 0 && !Weak::ptr_eq(x, w));
        self.count.store(watchers.len(), Ordering::SeqCst);
    }
}

/// A poll, ppoll, select or pselect6 call over nomu's own files: woken by
/// theirs heads. When the call also waits on host descriptors, it sleeps in
/// the host's poll with `doorbell` (a host eventfd) among them, which a
/// wake rings.
pub struct PollWaker {
    pub event: Event,
    doorbell: Option<OwnedFd>,
    rung: AtomicBool,
    heads: Mutex<Vec<Arc<PollHead>>>,
    me: Weak<PollWaker>,
}

impl PollWaker {
    /// With a doorbell when the wait is a host call.
    pub fn new(doorbell: bool) -> Result<Arc<PollWaker>, crate::abi::errno::Errno> {
        let doorbell = if doorbell { Some(hostev::eventfd(0, libc::EFD_NONBLOCK)?) } else { None };
        Ok(Arc::new_cyclic(|me| PollWaker {
            event: Event::new(),
            doorbell,
            rung: AtomicBool::new(false),
            heads: Mutex::new(Vec::new()),
            me: me.clone(),
        }))
    }

    /// Watches `head` until this waker is dropped (once per head).
    pub fn watch(&self, head: &Arc<PollHead>) {
        let mut heads = self.heads.lock().unwrap();
        if heads.iter().any(|h| Arc::ptr_eq(h, head)) {
            return;
        }
        let me: Weak<dyn Wakeup> = self.me.clone();
        head.watch(me);
        heads.push(head.clone());
    }

    pub fn doorbell(&self) -> Option<BorrowedFd<'_>> {
        self.doorbell.as_ref().map(|d| d.as_fd())
    }

    /// Empties the doorbell after it rang (before looking at the files
    /// again: a wake after this rings it anew).
    pub fn drain(&self) {
        if let Some(d) = &self.doorbell {
            self.rung.store(false, Ordering::SeqCst);
            let _ = hostev::eventfd_take(d.as_fd());
        }
    }
}

impl Wakeup for PollWaker {
    fn wake(&self) {
        self.event.notify();
        if let Some(d) = &self.doorbell {
            if !self.rung.swap(true, Ordering::SeqCst) {
                let _ = hostev::eventfd_add(d.as_fd(), 1);
            }
        }
    }
}

impl Drop for PollWaker {
    fn drop(&mut self) {
        let me: Weak<dyn Wakeup> = self.me.clone();
        for head in self.heads.get_mut().unwrap().drain(..) {
            head.unwatch(&me);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    struct Counter(AtomicU32);

    impl Wakeup for Counter {
        fn wake(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_notify_wakes_live_watchers_and_forgets_dropped_ones() {
        let head = PollHead::new();
        let a = Arc::new(Counter(AtomicU32::new(0)));
        let b = Arc::new(Counter(AtomicU32::new(0)));
        let (wa, wb): (Weak<dyn Wakeup>, Weak<dyn Wakeup>) = (Arc::downgrade(&a) as _, Arc::downgrade(&b) as _);
        head.watch(wa.clone());
        head.watch(wb);
        head.notify();
        assert_eq!((a.0.load(Ordering::SeqCst), b.0.load(Ordering::SeqCst)), (1, 1));
        drop(b);
        head.notify();
        assert_eq!(head.count.load(Ordering::SeqCst), 1);
        head.unwatch(&wa);
        head.notify();
        assert_eq!(a.0.load(Ordering::SeqCst), 2);
        assert_eq!(head.count.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_waker_rings_its_doorbell_once_until_drained() {
        let head = PollHead::new();
        let waker = PollWaker::new(true).unwrap();
        waker.watch(&head);
        waker.watch(&head);
        head.notify();
        head.notify();
        let bell = waker.doorbell().unwrap();
        assert_eq!(hostev::eventfd_take(bell), Ok(1));
        waker.rung.store(false, Ordering::SeqCst);
        head.notify();
        waker.drain();
        assert_eq!(hostev::eventfd_take(waker.doorbell().unwrap()), Err(crate::abi::errno::Errno::EAGAIN));
        drop(waker);
        assert_eq!(head.count.load(Ordering::SeqCst), 0);
    }
}
