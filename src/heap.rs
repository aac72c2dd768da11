//! The heap the offline commands run on, and what they may hold in it.
//!
//! `scx_wakelab` links scx_rustland_core, whose global allocator is a buddy allocator over
//! a fixed, locked arena of 64 MiB (`HEAP_SIZE` in its alloc.rs): every allocation takes a
//! block of a power of two bytes, at least 64 (`LEAF_SIZE`), and a `Vec` that grows holds
//! its old and its new block at once (the allocator has no `realloc` of its own).  When no
//! block is free the process aborts ("memory allocation of N bytes failed"), whatever it
//! was doing.  `explain`, `sim` and `oracle compare` normally run in `scx_wakelab-offline`
//! on the system allocator (`crate::offline` of the binary hands them over), but where
//! there is no trusted sibling they run in `scx_wakelab` itself, on that arena; `stats`
//! and `set` always do.
//!
//! Input limits that follow from the arena live with the code they guard
//! (`crate::json_limits` for JSON documents, `crate::sim::spec` for a simulation's size);
//! this module says what the arena is and which heap the process is on.

use std::sync::atomic::{AtomicBool, Ordering};

/// scx_rustland_core's arena (its `HEAP_SIZE`).
pub const FIXED_HEAP_BYTES: u64 = 64 << 20;

/// The smallest block its buddy allocator hands out (its `LEAF_SIZE`).
pub const FIXED_HEAP_LEAF: u64 = 64;

/// Set once this process runs an offline command on the fixed arena.
static ON_FIXED_HEAP: AtomicBool = AtomicBool::new(false);

/// Called by `scx_wakelab` when it runs an offline command itself, on its fixed arena,
/// because no trusted `scx_wakelab-offline` took it over.
pub fn declare_fixed_heap() {
    ON_FIXED_HEAP.store(true, Ordering::Relaxed);
}

/// Whether this process runs on the fixed arena (see [`declare_fixed_heap`]).
pub fn on_fixed_heap() -> bool {
    ON_FIXED_HEAP.load(Ordering::Relaxed)
}

/// The block the buddy allocator takes for a request of `bytes`.
pub const fn block_of(bytes: u64) -> u64 {
    if bytes <= FIXED_HEAP_LEAF {
        FIXED_HEAP_LEAF
    } else {
        bytes.next_power_of_two()
    }
}

/// How much memory a computation may plan for, counted in the fixed heap's blocks, and
/// whose limit that is: the line that refuses more says "more than {limit}, {whose}".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub bytes: u64,
    /// The largest single block it may plan for.
    pub largest_block: u64,
    pub whose: &'static str,
}

impl Budget {
    /// The limit in words: "32 MiB in blocks of at most 16 MiB", "1024 MiB".
    pub fn limit(&self) -> String {
        if self.largest_block < self.bytes {
            format!(
                "{} MiB in blocks of at most {} MiB",
                self.bytes >> 20,
                self.largest_block >> 20
            )
        } else {
            format!("{} MiB", self.bytes >> 20)
        }
    }
}

/// On the fixed arena: half of it, counted in its blocks.  Its allocator's tables, the rest
/// of the process (argument parsing, output, the topology and the engine) and the holes a
/// buddy heap is left with take the other half.
pub const FIXED_HEAP_BUDGET: u64 = FIXED_HEAP_BYTES / 2;

/// On the fixed arena, the largest block one may plan for: a quarter of it.  A buddy arena
/// has one block of half its size at most (here its upper half; its tables sit in the
/// lower), and not even that once anything small has landed in that half.
pub const FIXED_HEAP_LARGEST_BLOCK: u64 = FIXED_HEAP_BYTES / 4;

/// On the system allocator, which has no size of its own: what a development host gives
/// one process without swapping.  A simulation that plans for more runs for hours (a
/// million wake-ups take seconds), which is the better reason to refuse it.
pub const SYSTEM_HEAP_BUDGET: u64 = 1 << 30;

/// The budget of the heap this process is on.
pub fn budget() -> Budget {
    if on_fixed_heap() {
        Budget {
            bytes: FIXED_HEAP_BUDGET,
            largest_block: FIXED_HEAP_LARGEST_BLOCK,
            whose: "what scx_wakelab's own fixed 64 MiB heap allows, where it runs without \
                    scx_wakelab-offline beside it",
        }
    } else {
        Budget {
            bytes: SYSTEM_HEAP_BUDGET,
            largest_block: SYSTEM_HEAP_BUDGET,
            whose: "what the offline commands allow",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_said_in_words() {
        let fixed = Budget {
            bytes: FIXED_HEAP_BUDGET,
            largest_block: FIXED_HEAP_LARGEST_BLOCK,
            whose: "",
        };
        assert_eq!(fixed.limit(), "32 MiB in blocks of at most 16 MiB");
        assert_eq!(budget().limit(), "1024 MiB");
    }

    /// The measure the limits are checked with (`policy::tests_alloc`) counts as this heap
    /// does: whole blocks, and a growing vector's old block with its new one.
    #[test]
    fn the_measure_counts_as_the_fixed_heap_does() {
        use crate::policy::tests_alloc::peak_fixed_heap_bytes;
        let ((), one) = peak_fixed_heap_bytes(|| drop(Vec::<u8>::with_capacity(1)));
        assert_eq!(one, block_of(1));
        let ((), grown) = peak_fixed_heap_bytes(|| {
            let mut v = Vec::<u64>::with_capacity(512);
            v.extend(0..513);
        });
        assert_eq!(grown, block_of(8 * 1024) + block_of(8 * 512));
    }

    #[test]
    fn blocks_are_powers_of_two_of_at_least_a_leaf() {
        assert_eq!(block_of(0), 64);
        assert_eq!(block_of(1), 64);
        assert_eq!(block_of(64), 64);
        assert_eq!(block_of(65), 128);
        assert_eq!(block_of(20 << 20), 32 << 20);
    }
}
