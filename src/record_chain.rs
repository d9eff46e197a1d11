//! The record walk of a commit-log stretch: record starts found by following TOTALSIZE from a known start.

use crate::layout::{
    be_i32, is_message_magic, BLANK_MAGIC_CODE, MAGIC_CODE_POSITION, TOTALSIZE_POSITION,
};

/// Bytes ahead of a record start the walk touches while it reads the start (see [`chain_record_starts`]).
pub const CHAIN_TOUCH_AHEAD: usize = 8 << 10;
/// Bytes ahead of a record start whose every cache line the walk has loaded (see [`chain_record_starts`]).
pub const CHAIN_LINES_AHEAD: usize = 8 << 10;
/// The cache line's size the walk loads by.
const LINE: usize = 64;

/// How a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ChainEnd {
    /// A record starts at or past the stretch's end.
    Stop = 0,
    /// A BLANK end-of-file marker, or too few bytes left for a record's TOTALSIZE and MAGICCODE.
    Blank = 1,
    /// No record starts here (zeros or an unknown magic code): the end of the written data.
    Data = 2,
    /// The last start's TOTALSIZE is not positive or runs past the buffer; the caller reports that record.
    Bad = 3,
}

/// Appends to `out` the record starts from `start` (a record start) on, until a record starts at or past `stop`.
///
/// A position is a record start when its MAGICCODE is [`MESSAGE_MAGIC_CODE`](crate::layout::MESSAGE_MAGIC_CODE)
/// or `..._V2`; the next one is its TOTALSIZE further. Returns the position where the walk ended and how: with
/// [`ChainEnd::Bad`] that position is the last one appended, whose TOTALSIZE cannot be followed. Records are not
/// checked beyond their magic code and TOTALSIZE. Reads only inside `buf`.
pub fn chain_record_starts(
    buf: &[u8],
    start: i64,
    stop: i64,
    out: &mut Vec<i64>,
) -> (i64, ChainEnd) {
    let size = i64::try_from(buf.len()).unwrap_or(i64::MAX);
    let mut pos = start;
    let mut touched = 0u8;
    let mut lines_to = 0usize; // the walk has loaded every line from the stretch's start to here
    let (mut last_total, mut same_size) = (0i64, false); // the record before, and whether it had that size too
    loop {
        if pos >= stop {
            std::hint::black_box(touched);
            return (pos, ChainEnd::Stop);
        }
        let Ok(at) = usize::try_from(pos) else {
            return (pos, ChainEnd::Data);
        };
        // each start is read from the one before: the walk waits for memory once per record unless the
        // lines it will reach are already on their way; a load a few pages ahead (independent of this
        // record's TOTALSIZE) keeps them coming
        if let Some(&b) = at.checked_add(CHAIN_TOUCH_AHEAD).and_then(|a| buf.get(a)) {
            touched ^= b;
        }
        // records of one size are a stride the CPU's prefetcher follows; records of mixed sizes start where no
        // prefetcher looks: then every line of the next few KiB is loaded (independent loads, in flight
        // together), so the start the walk reads next is mostly in the cache already
        if !same_size {
            let window = at.saturating_add(CHAIN_LINES_AHEAD).min(buf.len());
            let mut line = lines_to.max(at);
            while line < window {
                touched ^= buf.get(line).copied().unwrap_or(0);
                line += LINE;
            }
            lines_to = line;
        }
        let magic = at
            .checked_add(MAGIC_CODE_POSITION)
            .and_then(|m| be_i32(buf, m));
        let Some(magic) = magic else {
            return (pos, ChainEnd::Blank); // fewer than 8 bytes left
        };
        if !is_message_magic(magic) {
            let kind = if magic == BLANK_MAGIC_CODE {
                ChainEnd::Blank
            } else {
                ChainEnd::Data
            };
            return (pos, kind);
        }
        out.push(pos);
        // in range: the magic code after it was
        let total = i64::from(be_i32(buf, at + TOTALSIZE_POSITION).unwrap_or(0));
        if total <= 0 || total > size - pos {
            return (pos, ChainEnd::Bad);
        }
        same_size = total == last_total;
        last_total = total;
        pos += total;
    }
}

/// Appends to `out` every position `p` in `[start, stop)` whose bytes `p+4 .. p+8` hold a record magic code, in
/// order: the possible record starts, including bodies that happen to hold the magic bytes.
pub fn magic_candidates(buf: &[u8], start: i64, stop: i64, out: &mut Vec<i64>) {
    let Ok(first) = usize::try_from(start.max(0)) else {
        return;
    };
    let last = usize::try_from(stop.max(0)).unwrap_or(usize::MAX);
    let Some(magics) = buf.get(first.saturating_add(MAGIC_CODE_POSITION)..) else {
        return;
    };
    for (i, word) in magics.windows(4).enumerate() {
        let p = first + i;
        if p >= last {
            break;
        }
        if let Ok(word) = <[u8; 4]>::try_from(word) {
            if is_message_magic(i32::from_be_bytes(word)) {
                out.push(p as i64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2};

    /// A record start of `total` bytes: TOTALSIZE, MAGICCODE, then zeros.
    fn record(total: usize, magic: i32) -> Vec<u8> {
        let mut r = vec![0u8; total.max(8)];
        r[..4].copy_from_slice(&(total as i32).to_be_bytes());
        r[4..8].copy_from_slice(&magic.to_be_bytes());
        r
    }

    fn walk(buf: &[u8], start: i64, stop: i64) -> (Vec<i64>, i64, ChainEnd) {
        let mut out = Vec::new();
        let (end, kind) = chain_record_starts(buf, start, stop, &mut out);
        (out, end, kind)
    }

    #[test]
    fn follows_v1_and_v2_records_to_a_blank_tail() {
        let mut buf = record(100, MESSAGE_MAGIC_CODE);
        buf.extend(record(60, MESSAGE_MAGIC_CODE_V2));
        buf.extend(record(40, BLANK_MAGIC_CODE));
        assert_eq!(
            walk(&buf, 0, buf.len() as i64),
            (vec![0, 100], 160, ChainEnd::Blank)
        );
    }

    #[test]
    fn a_body_holding_the_magic_bytes_is_skipped() {
        let mut first = record(64, MESSAGE_MAGIC_CODE);
        first[20..28].copy_from_slice(&record(8, MESSAGE_MAGIC_CODE)); // a liar inside the body
        let mut buf = first;
        buf.extend(record(30, MESSAGE_MAGIC_CODE));
        buf.extend([0u8; 16]);
        assert_eq!(
            walk(&buf, 0, buf.len() as i64),
            (vec![0, 64], 94, ChainEnd::Data)
        );
    }

    #[test]
    fn stops_at_the_first_start_at_or_past_stop() {
        let mut buf = Vec::new();
        for _ in 0..5 {
            buf.extend(record(50, MESSAGE_MAGIC_CODE));
        }
        assert_eq!(walk(&buf, 50, 120), (vec![50, 100], 150, ChainEnd::Stop));
        assert_eq!(walk(&buf, 100, 100), (vec![], 100, ChainEnd::Stop));
        assert_eq!(
            walk(&buf, 0, i64::MAX),
            (vec![0, 50, 100, 150, 200], 250, ChainEnd::Blank)
        );
    }

    #[test]
    fn bad_sizes_end_the_walk_at_that_record() {
        for total in [0i32, -1, i32::MIN, 41, i32::MAX] {
            let mut buf = record(20, MESSAGE_MAGIC_CODE);
            let mut bad = record(20, MESSAGE_MAGIC_CODE);
            bad[..4].copy_from_slice(&total.to_be_bytes());
            buf.extend(bad);
            assert_eq!(
                walk(&buf, 0, 1 << 40),
                (vec![0, 20], 20, ChainEnd::Bad),
                "TOTALSIZE {total}"
            );
        }
        let exact = record(40, MESSAGE_MAGIC_CODE); // the largest size that fits ends exactly at the buffer's end
        assert_eq!(walk(&exact, 0, 1 << 40), (vec![0], 40, ChainEnd::Blank));
    }

    #[test]
    fn candidates_include_the_liars() {
        let mut first = record(64, MESSAGE_MAGIC_CODE);
        first[20..28].copy_from_slice(&record(8, MESSAGE_MAGIC_CODE_V2));
        let mut buf = first;
        buf.extend(record(30, MESSAGE_MAGIC_CODE));
        let mut out = Vec::new();
        magic_candidates(&buf, 0, buf.len() as i64, &mut out);
        assert_eq!(out, vec![0, 20, 64]);
        out.clear();
        magic_candidates(&buf, 1, 64, &mut out);
        assert_eq!(out, vec![20]);
        out.clear();
        magic_candidates(&buf, 90, 1000, &mut out);
        assert_eq!(out, Vec::<i64>::new());
    }

    proptest::proptest! {
        #[test]
        fn a_chain_of_records_walks_back_to_its_starts(
            sizes in proptest::collection::vec((8usize..300, proptest::bool::ANY), 0..40),
            tail in 0usize..40,
        ) {
            let mut buf = Vec::new();
            let mut starts = Vec::new();
            for &(size, v2) in &sizes {
                starts.push(buf.len() as i64);
                buf.extend(record(size, if v2 { MESSAGE_MAGIC_CODE_V2 } else { MESSAGE_MAGIC_CODE }));
            }
            let end = buf.len() as i64;
            buf.extend(record(tail.max(8), BLANK_MAGIC_CODE));
            buf.truncate(end as usize + tail);
            // no bytes, too few for a marker, or a BLANK marker after the last record: all end the file
            proptest::prop_assert_eq!(walk(&buf, 0, i64::MAX), (starts.clone(), end, ChainEnd::Blank));
            let mut candidates = Vec::new();
            magic_candidates(&buf, 0, i64::MAX, &mut candidates);
            proptest::prop_assert_eq!(candidates, starts);
        }
    }

    #[test]
    fn short_tails_and_odd_starts() {
        let buf = record(20, MESSAGE_MAGIC_CODE);
        assert_eq!(walk(&buf[..7], 0, 7), (vec![], 0, ChainEnd::Blank));
        assert_eq!(walk(&buf, 15, 20), (vec![], 15, ChainEnd::Blank));
        assert_eq!(walk(&buf, 1000, 2000), (vec![], 1000, ChainEnd::Blank));
        assert_eq!(walk(&buf, -4, 20), (vec![], -4, ChainEnd::Data));
        assert_eq!(walk(&[], 0, 1), (vec![], 0, ChainEnd::Blank));
    }
}
