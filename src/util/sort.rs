//! Stable sorting through one compiled copy of the standard library's sort.
//!
//! Every `slice::sort`/`sort_by`/`sort_by_key` on a new element type or closure compiles its
//! own driftsort (3–4 KB each in the release binary): a dozen call sites cost ~50 KB. These
//! sort the positions instead (one `usize` sort for the whole binary, comparing through a
//! `dyn` closure), then move the elements into that order: still stable and O(n log n),
//! with only a small generic shell per element type. Use them instead of the slice methods
//! outside tests.

use std::cmp::Ordering;

/// `v.sort()`: stable.
pub fn sort<T: Ord>(v: &mut [T]) {
    sort_by(v, T::cmp)
}

/// `v.sort_by_key(key)`: stable.
pub fn sort_by_key<T, K: Ord>(v: &mut [T], mut key: impl FnMut(&T) -> K) {
    sort_by(v, |a, b| key(a).cmp(&key(b)))
}

/// `v.sort_by(compare)`: stable.
pub fn sort_by<T>(v: &mut [T], mut compare: impl FnMut(&T, &T) -> Ordering) {
    let order = sorted_positions(v.len(), &mut |i, j| compare(&v[i], &v[j]));
    permute(v, order);
}

/// The positions `0..n` in the order `compare` puts them: the one sort instance.
#[inline(never)]
fn sorted_positions(n: usize, compare: &mut dyn FnMut(usize, usize) -> Ordering) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| compare(i, j));
    order
}

/// Puts the element at `order[k]` at position `k`, walking each cycle of the permutation
/// once (a visited position is marked `DONE`).
fn permute<T>(v: &mut [T], mut order: Vec<usize>) {
    const DONE: usize = usize::MAX;
    for start in 0..v.len() {
        let mut at = start;
        while order[at] != DONE {
            let from = std::mem::replace(&mut order[at], DONE);
            if from == start {
                break;
            }
            v.swap(at, from);
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator: the tests need many orders, not good randomness.
    fn scrambled(n: usize, seed: u64) -> Vec<(u8, usize)> {
        let mut x = seed | 1;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x % 7) as u8, i)
            })
            .collect()
    }

    #[test]
    fn sorts_like_the_standard_library_stable_sort() {
        for n in [0, 1, 2, 3, 5, 8, 20, 33, 100, 1000] {
            for seed in 1..20 {
                let input = scrambled(n, seed);
                let mut want = input.clone();
                want.sort_by_key(|e| e.0);
                let mut got = input.clone();
                sort_by_key(&mut got, |e| e.0);
                assert_eq!(got, want, "n={n} seed={seed}");
                let mut got = input.clone();
                sort_by(&mut got, |a, b| b.cmp(a));
                let mut want = input;
                want.sort_by(|a, b| b.cmp(a));
                assert_eq!(got, want, "n={n} seed={seed} reversed");
            }
        }
    }

    #[test]
    fn sorts_owned_elements_without_losing_any() {
        let mut v: Vec<String> = ["b", "a", "c", "a", ""].iter().map(|s| s.to_string()).collect();
        sort(&mut v);
        assert_eq!(v, ["", "a", "a", "b", "c"]);
    }
}
