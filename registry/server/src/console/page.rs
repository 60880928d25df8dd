//! One sorted page out of an unsorted stream, without sorting the stream.
//!
//! The store keeps services in hash order; a console page is ten to a
//! hundred services in name order out of up to 600k. Collecting and sorting
//! every key would allocate and sort 600k entries per page view; instead a
//! max-heap keeps only the `page_no * page_size` smallest keys seen so far,
//! so the pass costs one comparison per key and memory O(page_no * page_size).

use std::collections::BinaryHeap;

/// Keeps the smallest `page_no * page_size` items offered, and counts all.
pub struct PageOf<T: Ord> {
    heap: BinaryHeap<T>,
    keep: usize,
    page_size: usize,
    seen: usize,
}

impl<T: Ord> PageOf<T> {
    /// A page `page_no` (from 1) of `page_size` items.
    pub fn new(page_no: usize, page_size: usize) -> Self {
        let keep = page_no.max(1).saturating_mul(page_size);
        PageOf {
            heap: BinaryHeap::with_capacity(keep.min(4096)),
            keep,
            page_size,
            seen: 0,
        }
    }

    /// Whether an item would be kept if offered now; lets a caller skip
    /// building (cloning) items that cannot make the page. Counts nothing.
    pub fn wants(&self, item: &impl PartialOrd<T>) -> bool {
        self.heap.len() < self.keep || self.heap.peek().is_some_and(|top| item < top)
    }

    /// Counts an item that matched the filter without building it (it was
    /// refused by [`PageOf::wants`]).
    pub fn count_only(&mut self) {
        self.seen += 1;
    }

    /// Offers one item that matched the filter.
    pub fn offer(&mut self, item: T) {
        self.seen += 1;
        if self.heap.len() < self.keep {
            self.heap.push(item);
        } else if self.heap.peek().is_some_and(|top| item < *top) {
            self.heap.pop();
            self.heap.push(item);
        }
    }

    /// Items offered or counted, on all pages.
    pub fn count(&self) -> usize {
        self.seen
    }

    /// The page: the last `page_size` of the kept items, in ascending order.
    pub fn finish(self) -> (usize, Vec<T>) {
        let mut kept = self.heap.into_sorted_vec();
        let start = self.keep.saturating_sub(self.page_size).min(kept.len());
        (self.seen, kept.split_off(start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(items: &[u32], page_no: usize, page_size: usize) -> (usize, Vec<u32>) {
        let mut p = PageOf::new(page_no, page_size);
        for &i in items {
            if p.wants(&i) {
                p.offer(i);
            } else {
                p.count_only();
            }
        }
        p.finish()
    }

    #[test]
    fn matches_sorting_everything() {
        // A scrambled 0..1000 in a fixed order (multiplying by a unit mod 1000).
        let items: Vec<u32> = (0..1000u32).map(|i| (i * 617) % 1000).collect();
        for (page_no, size) in [(1, 10), (2, 10), (7, 33), (100, 10), (101, 10), (1, 5000)] {
            let mut sorted = items.clone();
            sorted.sort_unstable();
            let start = ((page_no - 1) * size).min(sorted.len());
            let end = (start + size).min(sorted.len());
            assert_eq!(
                page(&items, page_no, size),
                (1000, sorted[start..end].to_vec()),
                "page {page_no} size {size}"
            );
        }
    }

    #[test]
    fn empty_and_past_the_end() {
        assert_eq!(page(&[], 1, 10), (0, vec![]));
        assert_eq!(page(&[3, 1, 2], 2, 10), (3, vec![]));
        assert_eq!(page(&[3, 1, 2], 2, 2), (3, vec![3]));
    }
}
