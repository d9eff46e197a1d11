//! The ordered scan's per-record queue test: whether a consume-queue read of the same request returns a record,
//! decided on the record's header alone (`store/read/ordered_scan.py` plans the rules).
//!
//! A record is kept when
//!
//! * its transaction type (SYSFLAG & [`TRANSACTION_TYPE_MASK`]) is [`TRANSACTION_NOT_TYPE`] or
//!   [`TRANSACTION_COMMIT_TYPE`]: dispatch writes no unit for PREPARED or ROLLBACK halves;
//! * its topic is one of the test's names (a topic that is not valid UTF-8 is compared as the broker decodes
//!   it: each maximal ill-formed subsequence becomes U+FFFD) and `(topic, QUEUEID)` is a selected queue (QUEUEID
//!   read as an unsigned 32-bit number);
//! * when that queue has a range, QUEUEOFFSET lies in `[lo, hi)` (a queue listed twice keeps its first range).
//!
//! Queues are slots `topic number × width + queue id` of dense tables when there are at most
//! [`DENSE_SLOTS`] of them (a lookup per record), else entries of a hash map.

use std::collections::HashMap;

use crate::columns::{span, GatherError};
use crate::layout::{load_lines, READ_AHEAD};

/// `MessageSysFlag.TRANSACTION_NOT_TYPE`.
pub const TRANSACTION_NOT_TYPE: i64 = 0;
/// `MessageSysFlag.TRANSACTION_COMMIT_TYPE`.
pub const TRANSACTION_COMMIT_TYPE: i64 = 0x2 << 2;
/// The SYSFLAG bits of the transaction type (`MessageSysFlag.getTransactionValue`).
pub const TRANSACTION_TYPE_MASK: i64 = 0x3 << 2;

/// The most queue slots (topics × width) numbered densely.
pub const DENSE_SLOTS: usize = 1 << 20;

/// No range: every record of the queue is kept.
const UNLIMITED: i32 = -1;
/// Not selected.
const UNSELECTED: i32 = -2;

/// How a queue's slot is found.
#[derive(Debug)]
enum Slots {
    /// `slot[topic × width + queue id]`: [`UNSELECTED`], [`UNLIMITED`] or the index of the queue's range.
    Dense { width: u64, slot: Vec<i32> },
    /// `(topic, queue id)` → [`UNLIMITED`] or the index of the queue's range; absent: not selected.
    Sparse(HashMap<(u32, u32), i32>),
}

/// The rules of one read: topic names, selected queues and the queues' offset ranges.
#[derive(Debug)]
pub struct QueueTest {
    names: HashMap<Vec<u8>, u32>,
    slots: Slots,
    ranges: Vec<(i64, i64)>,
}

/// Why a test could not be built.
#[derive(Debug, PartialEq, Eq)]
pub enum RulesError {
    /// A queue names a topic number past the names, or a negative queue id or topic number.
    Queue(usize),
    /// Two names are the same bytes.
    DuplicateName(usize),
}

impl QueueTest {
    /// The test of `names` (topic number `k` is `names[k]`), the `selected` `(topic number, queue id)` queues and
    /// the `(topic number, queue id, lo, hi)` ranges of `limits`.
    pub fn new(
        names: Vec<Vec<u8>>,
        selected: &[(i64, i64)],
        limits: &[(i64, i64, i64, i64)],
    ) -> Result<Self, RulesError> {
        let topics = names.len();
        let queue = |i: usize, topic: i64, qid: i64| -> Result<(u32, u32), RulesError> {
            match (u32::try_from(topic), u32::try_from(qid)) {
                (Ok(t), Ok(q)) if (t as usize) < topics => Ok((t, q)),
                _ => Err(RulesError::Queue(i)),
            }
        };
        let mut numbered = HashMap::with_capacity(topics);
        for (k, name) in names.into_iter().enumerate() {
            if numbered.insert(name, k as u32).is_some() {
                return Err(RulesError::DuplicateName(k));
            }
        }
        let wanted = selected
            .iter()
            .enumerate()
            .map(|(i, &(t, q))| queue(i, t, q))
            .collect::<Result<Vec<_>, _>>()?;
        let limited = limits
            .iter()
            .enumerate()
            .map(|(i, &(t, q, _, _))| queue(selected.len() + i, t, q))
            .collect::<Result<Vec<_>, _>>()?;
        let ranges = limits.iter().map(|&(_, _, lo, hi)| (lo, hi)).collect();
        let width = wanted
            .iter()
            .chain(&limited)
            .map(|&(_, q)| u64::from(q) + 1)
            .max()
            .unwrap_or(1);
        let dense = (topics as u64)
            .checked_mul(width)
            .filter(|&n| n <= DENSE_SLOTS as u64);
        let slots = match dense {
            Some(n) => {
                let mut slot = vec![UNSELECTED; n as usize];
                for &(t, q) in &wanted {
                    slot[(u64::from(t) * width + u64::from(q)) as usize] = UNLIMITED;
                }
                // the first range of a queue wins: written last to first
                for (j, &(t, q)) in limited.iter().enumerate().rev() {
                    let s = &mut slot[(u64::from(t) * width + u64::from(q)) as usize];
                    if *s != UNSELECTED {
                        *s = j as i32;
                    }
                }
                Slots::Dense { width, slot }
            }
            None => {
                let mut map: HashMap<(u32, u32), i32> =
                    wanted.iter().map(|&key| (key, UNLIMITED)).collect();
                for (j, key) in limited.iter().enumerate().rev() {
                    if let Some(s) = map.get_mut(key) {
                        *s = j as i32;
                    }
                }
                Slots::Sparse(map)
            }
        };
        Ok(QueueTest {
            names: numbered,
            slots,
            ranges,
        })
    }

    /// The number of the topic `value` names, if any (an ill-formed value as the broker decodes it).
    fn topic_number(&self, value: &[u8]) -> Option<u32> {
        if let Some(&k) = self.names.get(value) {
            return Some(k);
        }
        match String::from_utf8_lossy(value) {
            std::borrow::Cow::Owned(decoded) => self.names.get(decoded.as_bytes()).copied(),
            std::borrow::Cow::Borrowed(_) => None, // valid UTF-8: no decoding makes it another name
        }
    }

    /// Whether the record with this topic and header fields is kept; `last` remembers the topic found last
    /// (records of a stretch often repeat the topic before them).
    pub fn keeps<'b>(
        &self,
        topic: &'b [u8],
        sysflag: i64,
        queue_id: i64,
        queue_offset: i64,
        last: &mut Option<(&'b [u8], u32)>,
    ) -> bool {
        let tran = sysflag & TRANSACTION_TYPE_MASK;
        if tran != TRANSACTION_NOT_TYPE && tran != TRANSACTION_COMMIT_TYPE {
            return false;
        }
        let number = match *last {
            Some((name, k)) if name == topic => k,
            _ => match self.topic_number(topic) {
                Some(k) => {
                    *last = Some((topic, k));
                    k
                }
                None => return false,
            },
        };
        let qid = queue_id as u32; // QUEUEID as an unsigned 32-bit number
        let rule = match &self.slots {
            Slots::Dense { width, slot } => {
                if u64::from(qid) >= *width {
                    return false;
                }
                slot[(u64::from(number) * width + u64::from(qid)) as usize]
            }
            Slots::Sparse(map) => *map.get(&(number, qid)).unwrap_or(&UNSELECTED),
        };
        match rule {
            UNSELECTED => false,
            UNLIMITED => true,
            j => {
                let (lo, hi) = self.ranges[j as usize];
                lo <= queue_offset && queue_offset < hi
            }
        }
    }
}

/// `kept[i]` = 1 when [`QueueTest::keeps`] the record whose topic is `buf[topic_pos[i] ..][.. topic_len[i]]` and
/// whose header fields are `sysflag[i]`, `queue_id[i]`, `queue_offset[i]`, else 0. Returns the number kept; a
/// topic outside `buf` is `OutOfRange(row)`, inputs of different lengths `Shape`.
#[allow(clippy::too_many_arguments)]
pub fn test_records(
    buf: &[u8],
    topic_pos: &[i64],
    topic_len: &[i64],
    sysflag: &[i64],
    queue_id: &[i64],
    queue_offset: &[i64],
    test: &QueueTest,
    kept: &mut [u8],
) -> Result<usize, GatherError> {
    let n = topic_pos.len();
    if [
        topic_len.len(),
        sysflag.len(),
        queue_id.len(),
        queue_offset.len(),
        kept.len(),
    ]
    .iter()
    .any(|&len| len != n)
    {
        return Err(GatherError::Shape);
    }
    let mut last = None;
    let mut count = 0;
    for row in 0..n {
        if row % READ_AHEAD == 0 {
            // each topic lies a record further on: the lines of the topics ahead are loaded together
            load_lines(
                buf,
                topic_pos
                    .iter()
                    .skip(row + READ_AHEAD)
                    .take(READ_AHEAD)
                    .copied(),
            );
        }
        let topic =
            span(buf, topic_pos[row], topic_len[row]).ok_or(GatherError::OutOfRange(row))?;
        let keep = test.keeps(
            topic,
            sysflag[row],
            queue_id[row],
            queue_offset[row],
            &mut last,
        );
        kept[row] = u8::from(keep);
        count += usize::from(keep);
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(list: &[&[u8]]) -> Vec<Vec<u8>> {
        list.iter().map(|n| n.to_vec()).collect()
    }

    /// The rule as ordered_scan's documentation states it, over plain lists.
    fn reference(
        names: &[Vec<u8>],
        selected: &[(i64, i64)],
        limits: &[(i64, i64, i64, i64)],
        topic: &[u8],
        sysflag: i64,
        queue_id: i64,
        queue_offset: i64,
    ) -> bool {
        let tran = sysflag & TRANSACTION_TYPE_MASK;
        if tran != TRANSACTION_NOT_TYPE && tran != TRANSACTION_COMMIT_TYPE {
            return false;
        }
        let decoded = String::from_utf8_lossy(topic).into_owned().into_bytes();
        let Some(t) = names
            .iter()
            .position(|n| n.as_slice() == topic || *n == decoded)
        else {
            return false;
        };
        let q = i64::from(queue_id as u32);
        if !selected.contains(&(t as i64, q)) {
            return false;
        }
        match limits.iter().find(|l| l.0 == t as i64 && l.1 == q) {
            Some(&(_, _, lo, hi)) => lo <= queue_offset && queue_offset < hi,
            None => true,
        }
    }

    #[test]
    fn keeps_selected_queues_in_range_and_drops_transaction_halves() {
        let test = QueueTest::new(
            names(&[b"a", b"b"]),
            &[(0, 0), (0, 3), (1, 1)],
            &[(0, 3, 10, 20), (0, 3, 0, 5), (1, 7, 0, 1)],
        )
        .unwrap();
        let mut last = None;
        let mut keeps = |topic: &'static [u8], sysflag, qid, off| {
            test.keeps(topic, sysflag, qid, off, &mut last)
        };
        assert!(keeps(b"a", 0, 0, 123));
        assert!(keeps(b"a", TRANSACTION_COMMIT_TYPE, 0, 1));
        assert!(!keeps(b"a", 0x1 << 2, 0, 1)); // PREPARED
        assert!(!keeps(b"a", 0x3 << 2, 0, 1)); // ROLLBACK
        assert!(keeps(b"a", 0x1 | 0x2 | 0x10, 0, 1)); // other flags do not matter
        assert!(!keeps(b"a", 0, 1, 1)); // not selected
        assert!(!keeps(b"a", 0, 3, 9)); // the first range of queue 3 wins: [10, 20)
        assert!(keeps(b"a", 0, 3, 10));
        assert!(keeps(b"a", 0, 3, 19));
        assert!(!keeps(b"a", 0, 3, 20));
        assert!(!keeps(b"a", 0, 3, 4));
        assert!(keeps(b"b", 0, 1, -5));
        assert!(!keeps(b"c", 0, 0, 0));
        assert!(!keeps(b"", 0, 0, 0));
        assert!(!keeps(b"b", 0, 7, 0)); // a range of an unselected queue selects nothing
        assert!(!keeps(b"a", 0, -1, 0)); // QUEUEID 0xFFFFFFFF
    }

    #[test]
    fn an_ill_formed_topic_is_compared_as_the_broker_decodes_it() {
        let test = QueueTest::new(names(&["a\u{FFFD}".as_bytes()]), &[(0, 0)], &[]).unwrap();
        let mut last = None;
        assert!(test.keeps(b"a\xff", 0, 0, 0, &mut last));
        assert!(test.keeps(b"a\xe2\x82", 0, 0, 0, &mut last)); // a truncated sequence is one U+FFFD
        assert!(!test.keeps(b"a\xff\xff", 0, 0, 0, &mut last));
        assert!(test.keeps("a\u{FFFD}".as_bytes(), 0, 0, 0, &mut last));
    }

    #[test]
    fn bad_rules_are_refused() {
        assert_eq!(
            QueueTest::new(names(&[b"a"]), &[(1, 0)], &[]).unwrap_err(),
            RulesError::Queue(0)
        );
        assert_eq!(
            QueueTest::new(names(&[b"a"]), &[(0, 0)], &[(0, -1, 0, 1)]).unwrap_err(),
            RulesError::Queue(1)
        );
        assert_eq!(
            QueueTest::new(names(&[b"a", b"a"]), &[], &[]).unwrap_err(),
            RulesError::DuplicateName(1)
        );
    }

    #[test]
    fn test_records_marks_kept_rows_and_refuses_topics_outside_the_buffer() {
        let buf = b"xxaabbb";
        let test = QueueTest::new(names(&[b"aa", b"bbb"]), &[(0, 1), (1, 2)], &[]).unwrap();
        let mut kept = [9u8; 3];
        let n = test_records(
            buf,
            &[2, 4, 2],
            &[2, 3, 2],
            &[0, 0, 4],
            &[1, 2, 1],
            &[0; 3],
            &test,
            &mut kept,
        );
        assert_eq!(n, Ok(2));
        assert_eq!(kept, [1, 1, 0]);
        assert_eq!(
            test_records(
                buf,
                &[2, 6],
                &[2, 3],
                &[0; 2],
                &[1; 2],
                &[0; 2],
                &test,
                &mut kept[..2]
            ),
            Err(GatherError::OutOfRange(1))
        );
        assert_eq!(
            test_records(buf, &[2], &[2, 3], &[0], &[1], &[0], &test, &mut kept[..1]),
            Err(GatherError::Shape)
        );
    }

    proptest! {
        #[test]
        fn dense_and_sparse_tables_keep_what_the_rule_says(
            topic_count in 1usize..5,
            selected in proptest::collection::vec((0i64..5, 0i64..6), 0..12),
            limits in proptest::collection::vec((0i64..5, 0i64..6, -3i64..8, -3i64..8), 0..6),
            records in proptest::collection::vec((0usize..6, 0i64..16, -2i64..8, -4i64..10), 1..40),
            wide in any::<bool>(),
        ) {
            let pool: [&[u8]; 6] = [b"t0", b"t1", b"\xfft", b"t3", "\u{FFFD}t".as_bytes(), b"zz"];
            let list: Vec<Vec<u8>> = pool[..topic_count].iter().map(|n| n.to_vec())
                .filter(|n| n.as_slice() != b"\xfft").collect();
            let k = list.len() as i64;
            let selected: Vec<_> = selected.into_iter().filter(|&(t, _)| t < k)
                // a queue id far out makes the tables sparse
                .map(|(t, q)| (t, if wide && q == 5 { 1 << 30 } else { q })).collect();
            let limits: Vec<_> = limits.into_iter().filter(|&(t, ..)| t < k).collect();
            let test = QueueTest::new(list.clone(), &selected, &limits).unwrap();
            prop_assert_eq!(matches!(test.slots, Slots::Sparse(_)), wide && selected.iter().any(|&(_, q)| q == 1 << 30));
            let mut last = None;
            for (topic, sysflag, qid, offset) in records {
                let qid = if wide && qid == 5 { 1 << 30 } else { qid };
                let expected = reference(&list, &selected, &limits, pool[topic], sysflag, qid, offset);
                prop_assert_eq!(test.keeps(pool[topic], sysflag, qid, offset, &mut last), expected);
            }
        }
    }
}
