//! Appending keys to an index file (`IndexFile.putKey`, what `IndexService.buildIndex` calls per key), many at
//! a time, into the file's bytes.
//!
//! An index file (big-endian):
//!
//! | offset                      | bytes            | field                                                   |
//! |----------------------------:|------------------|---------------------------------------------------------|
//! | 0                           | 8                | beginTimestamp: store time of the first entry           |
//! | 8                           | 8                | endTimestamp: store time of the last entry              |
//! | 16                          | 8                | beginPhyOffset                                          |
//! | 24                          | 8                | endPhyOffset                                            |
//! | 32                          | 4                | hashSlotCount: slots in use                             |
//! | 36                          | 4                | indexCount: entries + 1 (entry numbers start at 1)      |
//! | [`INDEX_HEADER_SIZE`]       | 4 × slots        | hash slots: the number of the bucket's newest entry     |
//! | .. + 4 × slots              | 20 × max entries | entries: keyHash (4), phyOffset (8), timeDiff (4, seconds since beginTimestamp), prevIndex (4) |

use std::sync::atomic::{AtomicI32, Ordering};

/// `IndexHeader.INDEX_HEADER_SIZE`
pub const INDEX_HEADER_SIZE: usize = 40;
/// `IndexFile.hashSlotSize`
pub const HASH_SLOT_SIZE: usize = 4;
/// `IndexFile.indexSize`
pub const INDEX_SIZE: usize = 20;
/// `IndexFile.invalidIndex`: an empty slot, the end of a bucket's chain.
pub const INVALID_INDEX: i32 = 0;

/// The header of an index file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct IndexHeader {
    pub begin_timestamp: i64,
    pub end_timestamp: i64,
    pub begin_phy_offset: i64,
    pub end_phy_offset: i64,
    pub hash_slot_count: i32,
    pub index_count: i32,
}

impl IndexHeader {
    /// The header at the start of `file` (None when the file is shorter than a header).
    pub fn read(file: &[u8]) -> Option<Self> {
        use crate::layout::{be_i32, be_i64};
        Some(Self {
            begin_timestamp: be_i64(file, 0)?,
            end_timestamp: be_i64(file, 8)?,
            begin_phy_offset: be_i64(file, 16)?,
            end_phy_offset: be_i64(file, 24)?,
            hash_slot_count: be_i32(file, 32)?,
            index_count: be_i32(file, 36)?,
        })
    }

    fn write(&self, file: &mut [u8]) {
        file[0..8].copy_from_slice(&self.begin_timestamp.to_be_bytes());
        file[8..16].copy_from_slice(&self.end_timestamp.to_be_bytes());
        file[16..24].copy_from_slice(&self.begin_phy_offset.to_be_bytes());
        file[24..32].copy_from_slice(&self.end_phy_offset.to_be_bytes());
        file[32..36].copy_from_slice(&self.hash_slot_count.to_be_bytes());
        file[36..40].copy_from_slice(&self.index_count.to_be_bytes());
    }
}

/// Why keys could not be put.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexError {
    /// The key columns differ in length, or the file is not as long as `slots` and `max_entries` make it.
    Shape,
    /// The header's indexCount is negative or beyond `max_entries`.
    BadHeader,
    /// Key `.0`'s hash is not an `indexKeyHashMethod` value (0 ..= `Integer.MAX_VALUE`).
    BadHash(usize),
    /// Key `.0`'s record row lies outside its part's per-record columns.
    BadRow(usize),
}

/// The size of an index file of `slots` hash slots and `max_entries` entries.
pub fn index_file_size(slots: usize, max_entries: usize) -> Option<usize> {
    INDEX_HEADER_SIZE
        .checked_add(slots.checked_mul(HASH_SLOT_SIZE)?)?
        .checked_add(max_entries.checked_mul(INDEX_SIZE)?)
}

/// Keys to put, in order: each key's hash and the record it indexes, whose physical offset and store time are
/// the part's per-record columns at `rows[k]` (at `k` when `rows` is None). A publication hands over the keys
/// of many batches this way, each batch's columns as they are: no key is copied before it is put.
#[derive(Clone, Copy, Debug)]
pub struct KeyPart<'a> {
    pub hashes: &'a [i32],
    pub rows: Option<&'a [i32]>,
    pub phy_offsets: &'a [i64],
    pub store_timestamps: &'a [i64],
}

impl KeyPart<'_> {
    fn len(&self) -> usize {
        self.hashes.len()
    }

    /// (hash, physical offset, store time) of key `j` (checked to be in bounds by [`checked_put`]).
    fn key(&self, j: usize) -> (i32, i64, i64) {
        let row = self.rows.map_or(j, |rows| rows[j] as usize);
        (
            self.hashes[j],
            self.phy_offsets[row],
            self.store_timestamps[row],
        )
    }
}

/// The keys of `parts` from key number `k` on, in order.
fn keys_from<'a>(parts: &'a [KeyPart<'a>], k: usize) -> impl Iterator<Item = (i32, i64, i64)> + 'a {
    let mut skip = k;
    let mut first = 0;
    while first < parts.len() && skip >= parts[first].len() {
        skip -= parts[first].len();
        first += 1;
    }
    parts[first..]
        .iter()
        .enumerate()
        .flat_map(move |(i, part)| {
            let from = if i == 0 { skip } else { 0 };
            (from..part.len()).map(move |j| part.key(j))
        })
}

/// `IndexFile.putKey` for each key of `parts` in order, while the file has room (`indexCount < max_entries`):
/// the entry, the slot of its bucket, and the header (written back into `file`). Returns the number of keys put.
///
/// Putting keys one by one reads and writes a slot at random for each: with millions of keys and a table of
/// millions of slots, nearly every key waits for memory (40 ns a key measured). Here the keys are ordered by
/// bucket first (a stable radix sort), so the slots are visited in ascending order, each once: a bucket's keys
/// chain to each other in key order, its first key to what the slot held, and the slot ends at its last key.
/// The entries are then written in key order. The result is byte for byte the one-by-one result.
pub fn put_keys(
    file: &mut [u8],
    slots: usize,
    max_entries: usize,
    parts: &[KeyPart<'_>],
) -> Result<usize, IndexError> {
    put_keys_split(file, slots, max_entries, parts, ENTRIES_PER_THREAD)
}

/// Keys per thread at least: below twice this, one thread does all (starting a thread costs more than putting a
/// few thousand keys). A new index file's slots and entries are fresh page-cache memory, whose pages cost far
/// more than the bytes written into them; threads writing disjoint parts fault them in at once.
const ENTRIES_PER_THREAD: usize = 1 << 16;
/// At most this many threads put keys (the publication's other work runs beside them).
const MAX_THREADS: usize = 4;

/// [`put_keys`] with the slots and entries written by threads of at least `per_thread` keys each.
fn put_keys_split(
    file: &mut [u8],
    slots: usize,
    max_entries: usize,
    parts: &[KeyPart<'_>],
    per_thread: usize,
) -> Result<usize, IndexError> {
    let (mut header, put) = checked_put(file, slots, max_entries, parts)?;
    let first = header.index_count; // the entry number of the first key put
    let buckets: Vec<usize> = keys_from(parts, 0)
        .take(put)
        .map(|(h, _, _)| h as usize % slots)
        .collect();
    let prev = chain_by_bucket(file, &buckets, first, &mut header, per_thread);
    let entries_at = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE;
    // the first entries of a file set its begin values (numbers 0 and 1): one by one, as putKey does
    let mut k = 0;
    for key in keys_from(parts, 0).take(put) {
        if header.index_count > 1 {
            break;
        }
        put_entry(file, entries_at, &mut header, key, prev[k]);
        k += 1;
    }
    if k < put {
        // the rest only read the begin time: their entries are independent of each other
        let at = entries_at + header.index_count as usize * INDEX_SIZE;
        let region = &mut file[at..at + (put - k) * INDEX_SIZE];
        write_entries(
            region,
            header.begin_timestamp,
            (parts, k),
            &prev[k..put],
            per_thread,
        );
        if let Some((_, phy, ts)) = keys_from(parts, put - 1).next() {
            header.index_count += (put - k) as i32;
            header.end_phy_offset = phy;
            header.end_timestamp = ts;
        }
    }
    header.write(file);
    Ok(put)
}

/// The entries of the keys of `parts` from number `from` on, one per `prevs` (the previous entry of each),
/// into `region` (20 bytes each, in order), split over threads of at least `per_thread` entries.
fn write_entries(
    region: &mut [u8],
    begin_timestamp: i64,
    (parts, from): (&[KeyPart<'_>], usize),
    prevs: &[i32],
    per_thread: usize,
) {
    let n = prevs.len();
    let threads = thread_count(n, per_thread);
    let write = |out: &mut [u8], lo: usize| {
        let keys = keys_from(parts, from + lo);
        for ((entry, key), prev) in out.chunks_exact_mut(INDEX_SIZE).zip(keys).zip(&prevs[lo..]) {
            encode_entry(entry, begin_timestamp, key, *prev);
        }
    };
    if threads == 1 {
        write(region, 0);
        return;
    }
    let per = n.div_ceil(threads);
    std::thread::scope(|scope| {
        let mut rest = region;
        let mut lo = 0;
        while lo < n {
            let count = per.min(n - lo);
            let (part, tail) = rest.split_at_mut(count * INDEX_SIZE);
            rest = tail;
            let start = lo;
            if lo + count < n {
                scope.spawn(move || write(part, start));
            } else {
                write(part, start); // the last part on this thread
            }
            lo += count;
        }
    });
}

/// The next entry (number `header.index_count`) of `key` (hash, physical offset, store time), linked to `prev`,
/// and the header's counts, ends and (for the file's first entry) begin values.
fn put_entry(
    file: &mut [u8],
    entries_at: usize,
    header: &mut IndexHeader,
    key: (i32, i64, i64),
    prev: i32,
) {
    let (_, phy, ts) = key;
    let index_count = header.index_count;
    let at = entries_at + index_count as usize * INDEX_SIZE;
    encode_entry(
        &mut file[at..at + INDEX_SIZE],
        header.begin_timestamp,
        key,
        prev,
    );
    if index_count <= 1 {
        header.begin_phy_offset = phy;
        header.begin_timestamp = ts;
    }
    header.index_count += 1;
    header.end_phy_offset = phy;
    header.end_timestamp = ts;
}

/// One entry's 20 bytes: the key's hash, physical offset, seconds since the file's `begin_timestamp` (0 while
/// the file has none) and the previous entry of its bucket.
fn encode_entry(entry: &mut [u8], begin_timestamp: i64, key: (i32, i64, i64), prev: i32) {
    let (hash, phy, ts) = key;
    let time_diff = if begin_timestamp <= 0 {
        0
    } else {
        // Java's long division truncates towards zero; negative differences become 0
        (ts.wrapping_sub(begin_timestamp) / 1000).clamp(0, i64::from(i32::MAX))
    };
    entry[0..4].copy_from_slice(&hash.to_be_bytes());
    entry[4..12].copy_from_slice(&phy.to_be_bytes());
    entry[12..16].copy_from_slice(&(time_diff as i32).to_be_bytes());
    entry[16..20].copy_from_slice(&prev.to_be_bytes());
}

/// The header of `file` and how many of the keys it has room for, once the inputs pass [`put_keys`]'s checks:
/// the file as long as `slots` and `max_entries` make it, each part's columns consistent and its rows inside
/// them, every hash an `indexKeyHashMethod` value.
fn checked_put(
    file: &[u8],
    slots: usize,
    max_entries: usize,
    parts: &[KeyPart<'_>],
) -> Result<(IndexHeader, usize), IndexError> {
    if slots == 0 || index_file_size(slots, max_entries) != Some(file.len()) {
        return Err(IndexError::Shape);
    }
    let mut base = 0;
    for part in parts {
        let records = part.phy_offsets.len();
        if part.store_timestamps.len() != records {
            return Err(IndexError::Shape);
        }
        match part.rows {
            None if records != part.len() => return Err(IndexError::Shape),
            Some(rows) if rows.len() != part.len() => return Err(IndexError::Shape),
            Some(rows) => {
                if let Some(bad) = rows.iter().position(|&r| r < 0 || r as usize >= records) {
                    return Err(IndexError::BadRow(base + bad));
                }
            }
            None => {}
        }
        if let Some(bad) = part.hashes.iter().position(|&h| h < 0) {
            return Err(IndexError::BadHash(base + bad));
        }
        base += part.len();
    }
    let header = IndexHeader::read(file).ok_or(IndexError::Shape)?;
    let count = usize::try_from(header.index_count).map_err(|_| IndexError::BadHeader)?;
    if count > max_entries {
        return Err(IndexError::BadHeader);
    }
    Ok((header, base.min(max_entries - count)))
}

/// The previous entry of each key's bucket chain (keys numbered from `first` on, in order), with the slots of
/// `file` updated to each bucket's last key and `header.hash_slot_count` counting the keys that start a chain
/// (their slot held nothing valid: empty, or an entry number at or past theirs, from a torn write). Buckets are
/// independent: threads of at least `per_thread` keys each take a range of them (and of the slots, which a new
/// file has as fresh pages).
fn chain_by_bucket(
    file: &mut [u8],
    buckets: &[usize],
    first: i32,
    header: &mut IndexHeader,
    per_thread: usize,
) -> Vec<i32> {
    let sorted = by_bucket(buckets);
    let prev: Vec<AtomicI32> = (0..buckets.len())
        .map(|_| AtomicI32::new(INVALID_INDEX))
        .collect();
    let slots = &mut file[INDEX_HEADER_SIZE..];
    let threads = thread_count(sorted.len(), per_thread);
    let started = if threads == 1 {
        chain_buckets(slots, 0, &sorted, first, &prev)
    } else {
        // cut the keys near equal parts, each cut moved to the start of a bucket
        let bucket_of = |v: u64| (v >> 32) as usize;
        let mut cuts = vec![0usize];
        for t in 1..threads {
            let mut at = (sorted.len() * t / threads).max(*cuts.last().unwrap_or(&0));
            while at > 0 && at < sorted.len() && bucket_of(sorted[at]) == bucket_of(sorted[at - 1])
            {
                at += 1;
            }
            cuts.push(at.min(sorted.len()));
        }
        cuts.push(sorted.len());
        std::thread::scope(|scope| {
            let mut rest = slots;
            let mut base = 0; // the bucket `rest` starts at
            let mut handles = Vec::new();
            for w in cuts.windows(2) {
                let part = &sorted[w[0]..w[1]];
                let Some(&last) = part.last() else { continue };
                let end = bucket_of(last) + 1;
                let (mine, tail) = rest.split_at_mut((end - base) * HASH_SLOT_SIZE);
                rest = tail;
                let start = base;
                base = end;
                let prev = &prev;
                handles.push(scope.spawn(move || chain_buckets(mine, start, part, first, prev)));
            }
            handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        })
    };
    header.hash_slot_count += started;
    prev.into_iter().map(AtomicI32::into_inner).collect()
}

/// [`chain_by_bucket`] over the keys `sorted` (ordered by bucket) whose buckets' slots are `slots`, starting at
/// bucket `base`: sets `prev` of each key and each slot; returns how many keys start a chain.
fn chain_buckets(
    slots: &mut [u8],
    base: usize,
    sorted: &[u64],
    first: i32,
    prev: &[AtomicI32],
) -> i32 {
    let mut started = 0;
    let mut g = 0;
    while g < sorted.len() {
        let bucket = (sorted[g] >> 32) as usize;
        let slot_at = (bucket - base) * HASH_SLOT_SIZE;
        let slot: &mut [u8; 4] = (&mut slots[slot_at..slot_at + 4])
            .try_into()
            .expect("4 bytes");
        let mut last = i32::from_be_bytes(*slot);
        let mut n = g;
        while n < sorted.len() && (sorted[n] >> 32) as usize == bucket {
            let k = (sorted[n] & 0xFFFF_FFFF) as usize;
            let number = first + k as i32;
            if last <= INVALID_INDEX || last > number {
                last = INVALID_INDEX;
                started += 1;
            }
            prev[k].store(last, Ordering::Relaxed);
            last = number;
            n += 1;
        }
        *slot = last.to_be_bytes();
        g = n;
    }
    started
}

/// Threads for `n` items of at least `per_thread` each (at most [`MAX_THREADS`], at most the machine's cores).
fn thread_count(n: usize, per_thread: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    (n / per_thread.max(1)).clamp(1, cores.clamp(1, MAX_THREADS))
}

/// Each key as `bucket << 32 | position`, ordered by bucket, a bucket's keys in position order: a
/// least-significant-digit radix sort of the packed values on the bucket's bits, 11 a pass (as many passes as the
/// largest bucket needs), each pass reading in order and writing to 2,048 runs.
fn by_bucket(buckets: &[usize]) -> Vec<u64> {
    const BITS: u32 = 11;
    const DIGITS: usize = 1 << BITS;
    let mut sorted: Vec<u64> = buckets
        .iter()
        .enumerate()
        .map(|(k, &b)| (b as u64) << 32 | k as u64)
        .collect();
    let mut spare = vec![0u64; sorted.len()];
    let top = buckets.iter().copied().max().unwrap_or(0) as u64;
    let mut shift = 0;
    while shift < 32 && (top >> shift) > 0 {
        let digit = |v: u64| ((v >> (32 + shift)) as usize) & (DIGITS - 1);
        let mut starts = vec![0usize; DIGITS + 1];
        for &v in &sorted {
            starts[digit(v) + 1] += 1;
        }
        for d in 0..DIGITS {
            starts[d + 1] += starts[d];
        }
        for &v in &sorted {
            let d = digit(v);
            spare[starts[d]] = v;
            starts[d] += 1;
        }
        std::mem::swap(&mut sorted, &mut spare);
        shift += BITS;
    }
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn narrow(hashes: &[i64]) -> Vec<i32> {
        hashes.iter().map(|&h| h as i32).collect()
    }

    /// [`put_keys`] of keys given as one part of flat columns.
    fn put_flat(
        file: &mut [u8],
        slots: usize,
        max: usize,
        hashes: &[i64],
        phys: &[i64],
        ts: &[i64],
    ) -> Result<usize, IndexError> {
        put_split_flat(file, slots, max, (hashes, phys, ts), ENTRIES_PER_THREAD)
    }

    /// [`put_keys_split`] of keys given as one part of flat columns.
    fn put_split_flat(
        file: &mut [u8],
        slots: usize,
        max: usize,
        (hashes, phys, ts): (&[i64], &[i64], &[i64]),
        per_thread: usize,
    ) -> Result<usize, IndexError> {
        let hashes = narrow(hashes);
        let part = KeyPart {
            hashes: &hashes,
            rows: None,
            phy_offsets: phys,
            store_timestamps: ts,
        };
        put_keys_split(file, slots, max, &[part], per_thread)
    }

    /// The one-by-one `putKey` loop over valid inputs, the reference the bucket-ordered [`put_keys`] must equal.
    fn put_keys_one_by_one(
        file: &mut [u8],
        slots: usize,
        max: usize,
        keys: &[(i64, i64, i64)],
    ) -> usize {
        let mut header = IndexHeader::read(file).unwrap();
        let put = keys.len().min(max - header.index_count as usize);
        for &(hash, phy, ts) in &keys[..put] {
            let slot_at = INDEX_HEADER_SIZE + (hash as usize % slots) * HASH_SLOT_SIZE;
            let mut prev = i32::from_be_bytes(file[slot_at..slot_at + 4].try_into().unwrap());
            if prev <= INVALID_INDEX || prev > header.index_count {
                prev = INVALID_INDEX;
                header.hash_slot_count += 1;
            }
            file[slot_at..slot_at + 4].copy_from_slice(&header.index_count.to_be_bytes());
            let entries_at = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE;
            put_entry(file, entries_at, &mut header, (hash as i32, phy, ts), prev);
        }
        header.write(file);
        put
    }

    fn new_file(slots: usize, max_entries: usize) -> Vec<u8> {
        let mut file = vec![0u8; index_file_size(slots, max_entries).unwrap()];
        // a new file: indexCount 1 (entry numbers start at 1)
        file[36..40].copy_from_slice(&1i32.to_be_bytes());
        file
    }

    fn entry(file: &[u8], slots: usize, number: usize) -> (i32, i64, i32, i32) {
        let at = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + number * INDEX_SIZE;
        let e = &file[at..at + INDEX_SIZE];
        (
            i32::from_be_bytes(e[0..4].try_into().unwrap()),
            i64::from_be_bytes(e[4..12].try_into().unwrap()),
            i32::from_be_bytes(e[12..16].try_into().unwrap()),
            i32::from_be_bytes(e[16..20].try_into().unwrap()),
        )
    }

    fn slot(file: &[u8], bucket: usize) -> i32 {
        let at = INDEX_HEADER_SIZE + bucket * HASH_SLOT_SIZE;
        i32::from_be_bytes(file[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn keys_of_one_bucket_chain_newest_first() {
        let mut file = new_file(4, 8);
        let put = put_flat(
            &mut file,
            4,
            8,
            &[5, 1, 9],
            &[100, 200, 300],
            &[10_000, 12_500, 20_000],
        );
        assert_eq!(put, Ok(3));
        // 5, 1 and 9 share bucket 1: entry 3 → 2 → 1
        assert_eq!(slot(&file, 1), 3);
        assert_eq!(entry(&file, 4, 1), (5, 100, 0, 0));
        assert_eq!(entry(&file, 4, 2), (1, 200, 2, 1));
        assert_eq!(entry(&file, 4, 3), (9, 300, 10, 2));
        let h = IndexHeader::read(&file).unwrap();
        assert_eq!(
            h,
            IndexHeader {
                begin_timestamp: 10_000,
                end_timestamp: 20_000,
                begin_phy_offset: 100,
                end_phy_offset: 300,
                hash_slot_count: 1,
                index_count: 4,
            }
        );
    }

    #[test]
    fn a_full_file_takes_what_fits_and_stale_slots_are_ignored() {
        let mut file = new_file(2, 3);
        // a slot pointing past indexCount (a torn write) is treated as empty
        file[INDEX_HEADER_SIZE..INDEX_HEADER_SIZE + 4].copy_from_slice(&7i32.to_be_bytes());
        assert_eq!(
            put_flat(&mut file, 2, 3, &[0, 2, 4], &[1, 2, 3], &[0, 0, 0]),
            Ok(2)
        );
        assert_eq!(entry(&file, 2, 1).3, 0);
        assert_eq!(entry(&file, 2, 2).3, 1);
        assert_eq!(IndexHeader::read(&file).unwrap().index_count, 3);
        assert_eq!(put_flat(&mut file, 2, 3, &[1], &[4], &[0]), Ok(0));
    }

    #[test]
    fn time_diffs_are_clamped_like_java() {
        let mut file = new_file(1, 4);
        let ts = [5_000, 4_000, 5_000 + (i64::from(i32::MAX) + 10) * 1000];
        put_flat(&mut file, 1, 4, &[0, 0, 0], &[0, 0, 0], &ts).unwrap();
        assert_eq!(entry(&file, 1, 1).2, 0); // begin 0 when the first key is put
        assert_eq!(entry(&file, 1, 2).2, 0); // before the begin
        assert_eq!(entry(&file, 1, 3).2, i32::MAX);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let mut file = new_file(2, 2);
        assert_eq!(
            put_flat(&mut file, 3, 2, &[], &[], &[]),
            Err(IndexError::Shape)
        );
        assert_eq!(
            put_flat(&mut file, 2, 2, &[1], &[], &[]),
            Err(IndexError::Shape)
        );
        assert_eq!(
            put_flat(&mut file, 2, 2, &[-1], &[0], &[0]),
            Err(IndexError::BadHash(0))
        );
        let part = KeyPart {
            hashes: &[1, 1],
            rows: Some(&[0, 1]),
            phy_offsets: &[0],
            store_timestamps: &[0],
        };
        assert_eq!(
            put_keys(&mut file, 2, 2, &[part]),
            Err(IndexError::BadRow(1))
        );
        file[36..40].copy_from_slice(&9i32.to_be_bytes());
        assert_eq!(
            put_flat(&mut file, 2, 2, &[1], &[0], &[0]),
            Err(IndexError::BadHeader)
        );
    }

    proptest! {
        /// Every key is found by walking its bucket's chain from the slot, as `IndexFile.selectPhyOffset` does.
        #[test]
        fn every_key_is_reachable_from_its_slot(
            keys in proptest::collection::vec((0i64..1000, any::<i64>()), 0..60),
            slots in 1usize..16,
            split in 0usize..60,
        ) {
            let max = 64;
            let mut file = new_file(slots, max);
            let hashes: Vec<i64> = keys.iter().map(|k| k.0).collect();
            let phys: Vec<i64> = keys.iter().map(|k| k.1).collect();
            let ts = vec![1_000i64; keys.len()];
            let cut = split.min(keys.len());
            // two calls give what one gives
            put_flat(&mut file, slots, max, &hashes[..cut], &phys[..cut], &ts[..cut]).unwrap();
            put_flat(&mut file, slots, max, &hashes[cut..], &phys[cut..], &ts[cut..]).unwrap();
            for (n, (hash, phy)) in keys.iter().enumerate() {
                let mut at = slot(&file, *hash as usize % slots);
                let mut found = false;
                while at > 0 {
                    let (h, p, _, prev) = entry(&file, slots, at as usize);
                    if at as usize == n + 1 {
                        prop_assert_eq!((i64::from(h), p), (*hash, *phy));
                        found = true;
                    }
                    prop_assert!(prev < at);
                    at = prev;
                }
                prop_assert!(found);
            }
            let buckets: std::collections::HashSet<usize> =
                hashes.iter().map(|h| *h as usize % slots).collect();
            prop_assert_eq!(IndexHeader::read(&file).unwrap().hash_slot_count as usize, buckets.len());
        }
    }

    proptest! {
        /// The bucket-ordered puts give the one-by-one loop's bytes: over files partly filled, with stale and
        /// torn slots, keys crowding few buckets, files filling up, and several calls in a row.
        #[test]
        fn bucket_ordered_puts_equal_the_one_by_one_loop(
            keys in proptest::collection::vec((0i64..5000, any::<i64>(), 0i64..4_000_000_000_000i64), 0..300),
            slots in 1usize..5000,
            max in 1usize..400,
            cuts in proptest::collection::vec(0usize..300, 0..4),
            stale in proptest::collection::vec((0usize..5000, any::<i32>()), 0..20),
            begin_count in 0i32..3,
        ) {
            let mut file = new_file(slots, max);
            file[36..40].copy_from_slice(&begin_count.min(max as i32).to_be_bytes());
            for (bucket, value) in stale {
                let at = INDEX_HEADER_SIZE + (bucket % slots) * HASH_SLOT_SIZE;
                file[at..at + 4].copy_from_slice(&value.to_be_bytes());
            }
            let mut reference = file.clone();
            let hashes: Vec<i64> = keys.iter().map(|k| k.0).collect();
            let phys: Vec<i64> = keys.iter().map(|k| k.1).collect();
            let ts: Vec<i64> = keys.iter().map(|k| k.2).collect();
            let mut bounds: Vec<usize> = cuts.into_iter().map(|c| c.min(keys.len())).collect();
            bounds.push(0);
            bounds.push(keys.len());
            bounds.sort_unstable();
            for w in bounds.windows(2) {
                let (a, b) = (w[0], w[1]);
                let got = put_flat(&mut file, slots, max, &hashes[a..b], &phys[a..b], &ts[a..b]);
                let want = put_keys_one_by_one(&mut reference, slots, max, &keys[a..b]);
                prop_assert_eq!(got, Ok(want));
            }
            prop_assert!(file == reference);
        }

        /// Keys given as several parts, each key naming its record in the part's columns, are put as the same
        /// keys given flat (one thread or several).
        #[test]
        fn parts_with_rows_equal_the_flat_keys(
            parts in proptest::collection::vec(
                (proptest::collection::vec((any::<i64>(), 0i64..4_000_000_000_000i64), 1..20),
                 proptest::collection::vec((0i32..400, any::<prop::sample::Index>()), 0..40)), 0..5),
            slots in 1usize..300,
            per_thread in 1usize..9,
        ) {
            let max = 120;
            let mut file = new_file(slots, max);
            let mut reference = file.clone();
            let records: Vec<(Vec<i64>, Vec<i64>)> = parts.iter()
                .map(|(recs, _)| (recs.iter().map(|r| r.0).collect(), recs.iter().map(|r| r.1).collect()))
                .collect();
            let keys: Vec<(Vec<i32>, Vec<i32>)> = parts.iter()
                .map(|(recs, ks)| (ks.iter().map(|k| k.0).collect(),
                                   ks.iter().map(|k| k.1.index(recs.len()) as i32).collect()))
                .collect();
            let given: Vec<KeyPart> = keys.iter().zip(&records).map(|((h, r), (p, t))| KeyPart {
                hashes: h, rows: Some(r), phy_offsets: p, store_timestamps: t,
            }).collect();
            let (mut fh, mut fp, mut ft) = (vec![], vec![], vec![]);
            for ((h, r), (p, t)) in keys.iter().zip(&records) {
                for (hash, row) in h.iter().zip(r) {
                    fh.push(i64::from(*hash));
                    fp.push(p[*row as usize]);
                    ft.push(t[*row as usize]);
                }
            }
            let got = put_keys_split(&mut file, slots, max, &given, per_thread);
            let want = put_flat(&mut reference, slots, max, &fh, &fp, &ft);
            prop_assert_eq!(got, want);
            prop_assert!(file == reference);
        }

        /// Entries written by several threads (a few entries each here) are the one-by-one loop's bytes.
        #[test]
        fn entries_split_over_threads_equal_the_one_by_one_loop(
            keys in proptest::collection::vec((0i64..500, any::<i64>(), 0i64..4_000_000_000_000i64), 0..200),
            slots in 1usize..500,
            per_thread in 1usize..9,
            begin_count in 0i32..3,
        ) {
            let max = 150;
            let mut file = new_file(slots, max);
            file[36..40].copy_from_slice(&begin_count.to_be_bytes());
            let mut reference = file.clone();
            let hashes: Vec<i64> = keys.iter().map(|k| k.0).collect();
            let phys: Vec<i64> = keys.iter().map(|k| k.1).collect();
            let ts: Vec<i64> = keys.iter().map(|k| k.2).collect();
            let got = put_split_flat(&mut file, slots, max, (&hashes, &phys, &ts), per_thread);
            let want = put_keys_one_by_one(&mut reference, slots, max, &keys);
            prop_assert_eq!(got, Ok(want));
            prop_assert!(file == reference);
        }

        #[test]
        fn keys_are_ordered_by_bucket_then_position(buckets in proptest::collection::vec(0usize..5_000_000, 0..500)) {
            let sorted = by_bucket(&buckets);
            let mut want: Vec<u64> = buckets.iter().enumerate().map(|(k, &b)| (b as u64) << 32 | k as u64).collect();
            want.sort_unstable();
            prop_assert_eq!(sorted, want);
        }
    }
}
