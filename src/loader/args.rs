//! argv or envp as an exec hands them to the new program: the strings back
//! to back, each with its NUL, as the new stack and /proc/PID/cmdline and
//! environ hold them. One buffer, not one per string: an exec with the
//! usual environment (~40 strings) spent ~1 us allocating and freeing them.
//! Their NULs are found with the memchr crate (SIMD).

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ArgStrings {
    bytes: Vec<u8>,
    count: usize,
    /// The longest string's length with its NUL (Linux's MAX_ARG_STRLEN
    /// bounds it), kept as they come: no pass over them to check it.
    longest: usize,
}

impl ArgStrings {
    pub fn with_capacity(count: usize) -> ArgStrings {
        // A guess at the bytes: most strings are short.
        ArgStrings { bytes: Vec::with_capacity(count * 32), count: 0, longest: 0 }
    }

    /// Appends a string (without NUL; it ends at the first NUL if it has one).
    pub fn push(&mut self, s: &[u8]) {
        let s = memchr::memchr(0, s).map_or(s, |n| &s[..n]);
        self.bytes.extend_from_slice(s);
        self.bytes.push(0);
        self.count += 1;
        self.longest = self.longest.max(s.len() + 1);
    }

    /// Appends a string given with its NUL, its only one (and last byte).
    pub fn push_with_nul(&mut self, s: &[u8]) {
        debug_assert!(memchr::memchr(0, s) == Some(s.len() - 1));
        self.bytes.extend_from_slice(s);
        self.count += 1;
        self.longest = self.longest.max(s.len());
    }

    /// How many strings.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The longest string's length, its NUL counted (0 for none).
    pub fn longest(&self) -> usize {
        self.longest
    }

    /// The strings, each followed by its NUL.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The strings, without their NULs.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        // One SIMD pass over them all: core's search per string (a byte
        // loop for most) was ~5% of a vfork + execve + wait.
        let mut start = 0;
        memchr::memchr_iter(0, &self.bytes).map(move |end| {
            let s = &self.bytes[start..end];
            start = end + 1;
            s
        })
    }
}

impl<'a> FromIterator<&'a [u8]> for ArgStrings {
    fn from_iter<I: IntoIterator<Item = &'a [u8]>>(iter: I) -> ArgStrings {
        let mut out = ArgStrings::default();
        for s in iter {
            out.push(s);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::ArgStrings;

    #[test]
    fn strings_back_to_back() {
        let mut a: ArgStrings = [&b"sh"[..], b"", b"-c"].into_iter().collect();
        a.push_with_nul(b"echo hi\0");
        a.push(b"cut\0here");
        assert_eq!(a.count(), 5);
        assert_eq!(a.longest(), 8);
        assert_eq!(a.bytes(), b"sh\0\0-c\0echo hi\0cut\0");
        let back: Vec<&[u8]> = a.iter().collect();
        assert_eq!(back, [&b"sh"[..], b"", b"-c", b"echo hi", b"cut"]);
        assert!(ArgStrings::default().iter().next().is_none());
    }
}
