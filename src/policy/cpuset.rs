//! `CpuSet`: a fixed-size CPU bitmask, the policy's `struct cpumask`.
//!
//! Up to [`MAX_CPUS`] (1024) CPUs in sixteen `u64` words, so it is `Copy`, lives on the
//! stack and never allocates: the decision path copies and intersects masks freely, the way
//! fair.c uses `select_rq_mask` as scratch space.  Iteration is in ascending CPU order
//! (`for_each_cpu`) or wraps around from a start CPU (`for_each_cpu_wrap`), which is the
//! order every idle scan in `select_idle_sibling()` uses.
//!
//! Serialised as a Linux cpulist string ("0-3,8,10-11"); deserialised from such a string or
//! from a JSON array of CPU ids, so scenario files can use either.

use std::fmt;

use serde::de::{self, SeqAccess};
use serde::{Serialize, Serializer};

/// Largest number of CPUs the policy can describe (NR_CPUS of a big distro config).
pub const MAX_CPUS: usize = 1024;
const WORDS: usize = MAX_CPUS / 64;

/// A set of CPU ids below [`MAX_CPUS`].  Ids at or above `MAX_CPUS` are silently ignored
/// by [`CpuSet::set`] and never contained, so a bad id cannot corrupt the mask.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpuSet {
    words: [u64; WORDS],
}

impl Default for CpuSet {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuSet {
    /// The empty set.
    pub const fn new() -> Self {
        CpuSet { words: [0; WORDS] }
    }

    /// The set whose bit `n % 64` of word `n / 64` says whether CPU `n` is in
    /// it (the kernel's `struct cpumask` layout on 64-bit); words beyond
    /// `MAX_CPUS` are ignored.
    pub fn from_words(words: &[u64]) -> Self {
        let mut s = Self::new();
        for (w, v) in s.words.iter_mut().zip(words) {
            *w = *v;
        }
        s
    }

    /// CPUs `0..n` (clamped to `MAX_CPUS`).
    pub fn first_n(n: usize) -> Self {
        let mut s = Self::new();
        let n = n.min(MAX_CPUS);
        for w in 0..WORDS {
            let lo = w * 64;
            if n >= lo + 64 {
                s.words[w] = u64::MAX;
            } else if n > lo {
                s.words[w] = (1u64 << (n - lo)) - 1;
            }
        }
        s
    }

    /// A set holding exactly the given CPUs.
    pub fn from_cpus<I: IntoIterator<Item = usize>>(cpus: I) -> Self {
        let mut s = Self::new();
        for c in cpus {
            s.set(c);
        }
        s
    }

    /// A set holding the single CPU `cpu`.
    pub fn single(cpu: usize) -> Self {
        let mut s = Self::new();
        s.set(cpu);
        s
    }

    #[inline]
    pub fn set(&mut self, cpu: usize) {
        if cpu < MAX_CPUS {
            self.words[cpu / 64] |= 1u64 << (cpu % 64);
        }
    }

    #[inline]
    pub fn clear(&mut self, cpu: usize) {
        if cpu < MAX_CPUS {
            self.words[cpu / 64] &= !(1u64 << (cpu % 64));
        }
    }

    #[inline]
    pub fn contains(&self, cpu: usize) -> bool {
        cpu < MAX_CPUS && self.words[cpu / 64] & (1u64 << (cpu % 64)) != 0
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Number of CPUs in the set (`cpumask_weight`).
    #[inline]
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Exactly one CPU in the set (`cpumask_weight() == 1`), found without counting them
    /// all: every decision asks it of the task's allowed CPUs.
    #[inline]
    pub fn is_single(&self) -> bool {
        let mut seen = false;
        for &w in &self.words {
            if w != 0 {
                if seen || w & (w - 1) != 0 {
                    return false;
                }
                seen = true;
            }
        }
        seen
    }

    /// Lowest CPU in the set (`cpumask_first`), if any.
    #[inline]
    pub fn first(&self) -> Option<usize> {
        self.next_from(0)
    }

    /// `self ∩ other` (`cpumask_and`).
    #[inline]
    pub fn and(&self, other: &CpuSet) -> CpuSet {
        let mut r = *self;
        for (a, b) in r.words.iter_mut().zip(other.words.iter()) {
            *a &= *b;
        }
        r
    }

    /// `self ∪ other` (`cpumask_or`).
    #[inline]
    pub fn or(&self, other: &CpuSet) -> CpuSet {
        let mut r = *self;
        for (a, b) in r.words.iter_mut().zip(other.words.iter()) {
            *a |= *b;
        }
        r
    }

    /// `self \ other` (`cpumask_andnot`).
    #[inline]
    pub fn and_not(&self, other: &CpuSet) -> CpuSet {
        let mut r = *self;
        for (a, b) in r.words.iter_mut().zip(other.words.iter()) {
            *a &= !*b;
        }
        r
    }

    /// Removes every CPU of `other` from `self` in place.
    #[inline]
    pub fn remove_all(&mut self, other: &CpuSet) {
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a &= !*b;
        }
    }

    /// True when the two sets share at least one CPU (`cpumask_intersects`).
    #[inline]
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.words
            .iter()
            .zip(other.words.iter())
            .any(|(a, b)| a & b != 0)
    }

    /// True when every CPU of `self` is in `other` (`cpumask_subset`).
    #[inline]
    pub fn is_subset_of(&self, other: &CpuSet) -> bool {
        self.words
            .iter()
            .zip(other.words.iter())
            .all(|(a, b)| a & !b == 0)
    }

    /// Smallest CPU `>= from` in the set.
    #[inline]
    pub fn next_from(&self, from: usize) -> Option<usize> {
        if from >= MAX_CPUS {
            return None;
        }
        let mut w = from / 64;
        let mut bits = self.words[w] & (u64::MAX << (from % 64));
        loop {
            if bits != 0 {
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
            w += 1;
            if w >= WORDS {
                return None;
            }
            bits = self.words[w];
        }
    }

    /// Ascending iteration (`for_each_cpu`).
    #[inline]
    pub fn iter(&self) -> CpuSetIter<'_> {
        CpuSetIter { set: self, next: 0 }
    }

    /// Iteration that starts at `start` (or the first CPU after it), runs to the top and
    /// wraps around to the CPUs below `start` (`for_each_cpu_wrap`).  Every CPU of the set
    /// is visited exactly once.  The iterator reads the set it borrows; a scan that removes
    /// CPUs while iterating (the single-pass core scan) uses [`CpuSet::next_wrap`] instead.
    #[inline]
    pub fn iter_wrap(&self, start: usize) -> WrapIter<'_> {
        let start = if start >= MAX_CPUS { 0 } else { start };
        WrapIter {
            set: self,
            start,
            next: Some(start),
            wrapped: false,
        }
    }

    /// One step of a wrap-around walk that tolerates the set changing under it: the next CPU
    /// of the set at or after `from` and, once past the top, below `start`.  `wrapped` is
    /// the walk's state; start it at `false`.
    #[inline]
    pub fn next_wrap(&self, from: usize, start: usize, wrapped: &mut bool) -> Option<usize> {
        if !*wrapped {
            if let Some(c) = self.next_from(from) {
                return Some(c);
            }
            *wrapped = true;
            return self.next_from(0).filter(|&c| c < start);
        }
        self.next_from(from).filter(|&c| c < start)
    }

    /// Renders the set as a Linux cpulist ("0-3,8").  Allocates; not for the decision path.
    pub fn to_cpulist(&self) -> String {
        let mut out = String::new();
        let mut it = self.iter().peekable();
        while let Some(lo) = it.next() {
            let mut hi = lo;
            while it.peek() == Some(&(hi + 1)) {
                hi = it.next().unwrap();
            }
            if !out.is_empty() {
                out.push(',');
            }
            if hi == lo {
                out.push_str(&lo.to_string());
            } else {
                out.push_str(&format!("{lo}-{hi}"));
            }
        }
        out
    }

    /// Parses a Linux cpulist ("0-3,8,10-11"; empty string = empty set).
    pub fn parse_cpulist(s: &str) -> Result<CpuSet, String> {
        let mut set = CpuSet::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_cpu(a)?, parse_cpu(b)?),
                None => {
                    let c = parse_cpu(part)?;
                    (c, c)
                }
            };
            if lo > hi {
                return Err(format!("cpulist range '{part}' runs backwards"));
            }
            for c in lo..=hi {
                set.set(c);
            }
        }
        Ok(set)
    }
}

fn parse_cpu(s: &str) -> Result<usize, String> {
    let c: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a CPU id"))?;
    if c >= MAX_CPUS {
        return Err(format!(
            "CPU {c} is beyond the policy's limit of {MAX_CPUS} CPUs"
        ));
    }
    Ok(c)
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet[{}]", self.to_cpulist())
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_cpulist())
    }
}

/// Ascending iterator over a [`CpuSet`].
pub struct CpuSetIter<'a> {
    set: &'a CpuSet,
    next: usize,
}

impl Iterator for CpuSetIter<'_> {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        let c = self.set.next_from(self.next)?;
        self.next = c + 1;
        Some(c)
    }
}

/// Wrap-around iterator over a [`CpuSet`] (`for_each_cpu_wrap`).
pub struct WrapIter<'a> {
    set: &'a CpuSet,
    start: usize,
    next: Option<usize>,
    wrapped: bool,
}

impl Iterator for WrapIter<'_> {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        let from = self.next?;
        match self.set.next_wrap(from, self.start, &mut self.wrapped) {
            Some(c) => {
                self.next = Some(c + 1);
                Some(c)
            }
            None => {
                self.next = None;
                None
            }
        }
    }
}

impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_cpulist())
    }
}

super::deserialize_by_visitor!(
    CpuSet,
    "a cpulist string like \"0-3,8\" or an array of CPU ids",
    deserialize_any,
    {
        fn visit_str<E: de::Error>(self, v: &str) -> Result<CpuSet, E> {
            CpuSet::parse_cpulist(v).map_err(E::custom)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CpuSet, A::Error> {
            let mut set = CpuSet::new();
            while let Some(c) = seq.next_element::<u64>()? {
                if c as usize >= MAX_CPUS {
                    return Err(de::Error::custom(format!(
                        "CPU {c} is beyond the policy's limit of {MAX_CPUS} CPUs"
                    )));
                }
                set.set(c as usize);
            }
            Ok(set)
        }
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_words_is_the_kernel_cpumask_layout() {
        let s = CpuSet::from_words(&[0b1011, 0, 1 << 1]);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 3, 129]);
        // More words than MAX_CPUS holds: the rest is ignored.
        let big = vec![u64::MAX; 20];
        assert_eq!(CpuSet::from_words(&big).count(), MAX_CPUS);
        assert!(CpuSet::from_words(&[]).is_empty());
    }

    #[test]
    fn wrap_visits_every_cpu_once_starting_at_start() {
        let s = CpuSet::from_cpus([1, 3, 5, 64, 200, 1023]);
        let v: Vec<_> = s.iter_wrap(5).collect();
        assert_eq!(v, vec![5, 64, 200, 1023, 1, 3]);
        let v: Vec<_> = s.iter_wrap(4).collect();
        assert_eq!(v, vec![5, 64, 200, 1023, 1, 3]);
        let v: Vec<_> = s.iter_wrap(0).collect();
        assert_eq!(v, vec![1, 3, 5, 64, 200, 1023]);
        let v: Vec<_> = s.iter_wrap(1024).collect();
        assert_eq!(v, vec![1, 3, 5, 64, 200, 1023]);
        assert_eq!(CpuSet::new().iter_wrap(3).count(), 0);
    }

    #[test]
    fn next_wrap_tolerates_removal() {
        // The single-pass core scan removes a core's siblings while walking.
        let mut s = CpuSet::first_n(8);
        let (start, mut wrapped, mut from) = (5, false, 5);
        let mut seen = vec![];
        while let Some(c) = s.next_wrap(from, start, &mut wrapped) {
            seen.push(c);
            // remove the "sibling" c^1 as select_idle_core does
            s.clear(c ^ 1);
            from = c + 1;
        }
        assert_eq!(seen, vec![5, 6, 0, 2]);
    }

    #[test]
    fn cpulist_roundtrip_and_json_forms() {
        let s = CpuSet::parse_cpulist("0-3, 8,10-11").unwrap();
        assert_eq!(s.to_cpulist(), "0-3,8,10-11");
        assert_eq!(s.count(), 7);
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(j, "\"0-3,8,10-11\"");
        let back: CpuSet = serde_json::from_str("[0,1,2,3,8,10,11]").unwrap();
        assert_eq!(back, s);
        assert!(CpuSet::parse_cpulist("3-1").is_err());
        assert!(CpuSet::parse_cpulist("x").is_err());
        assert!(serde_json::from_str::<CpuSet>("[5000]").is_err());
    }

    #[test]
    fn set_algebra() {
        let a = CpuSet::first_n(70);
        assert_eq!(a.count(), 70);
        let b = CpuSet::from_cpus([3, 69, 70]);
        assert_eq!(a.and(&b), CpuSet::from_cpus([3, 69]));
        assert_eq!(a.or(&b).count(), 71);
        assert_eq!(a.and_not(&b).count(), 68);
        assert!(a.intersects(&b));
        assert!(!b.is_subset_of(&a));
        assert!(CpuSet::from_cpus([3, 69]).is_subset_of(&a));
        assert_eq!(b.first(), Some(3));
        let mut c = b;
        c.set(5000);
        assert_eq!(c, b);
        assert!(!c.contains(5000));
    }

    #[test]
    fn is_single_is_a_count_of_one() {
        let many = [
            CpuSet::new(),
            CpuSet::first_n(70),
            CpuSet::from_cpus([3, 69, 70]),
            CpuSet::from_cpus([3, 69]),
            CpuSet::from_cpus([64, 65]),
        ];
        for s in many {
            assert!(!s.is_single(), "{s}");
        }
        for c in [0, 63, 64, 700, 1023] {
            assert!(CpuSet::single(c).is_single(), "{c}");
        }
    }
}
