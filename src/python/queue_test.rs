//! `QueueTest` and `test_records`: the ordered scan's per-record queue test (see [`crate::queue_test`]).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::buffers::View;
use crate::columns::GatherError;
use crate::queue_test::{self, RulesError};

/// QueueTest(names, selected_topic, selected_queue, limits): the rules of one read. `names` (bytes, distinct):
/// topic number k is names[k]; `selected_topic`, `selected_queue` (int64): the selected queues; `limits` (int64,
/// 4 per range): (topic number, queue id, lo, hi) queue-offset ranges.
#[pyclass(frozen, module = "rocketstore_spark._native")]
pub struct QueueTest(pub queue_test::QueueTest);

#[pymethods]
impl QueueTest {
    #[new]
    fn new(
        names: Vec<Vec<u8>>,
        selected_topic: &Bound<'_, PyAny>,
        selected_queue: &Bound<'_, PyAny>,
        limits: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let (topics, queues) = (
            View::<i64>::read(selected_topic)?,
            View::<i64>::read(selected_queue)?,
        );
        let limits = View::<i64>::read(limits)?;
        if topics.slice().len() != queues.slice().len() || limits.slice().len() % 4 != 0 {
            return Err(PyValueError::new_err(
                "QueueTest: one queue id per selected topic, four numbers per range",
            ));
        }
        let selected: Vec<(i64, i64)> = topics
            .slice()
            .iter()
            .copied()
            .zip(queues.slice().iter().copied())
            .collect();
        let ranges: Vec<(i64, i64, i64, i64)> = limits
            .slice()
            .chunks_exact(4)
            .map(|r| (r[0], r[1], r[2], r[3]))
            .collect();
        match queue_test::QueueTest::new(names, &selected, &ranges) {
            Ok(test) => Ok(QueueTest(test)),
            Err(RulesError::Queue(i)) => Err(PyValueError::new_err(format!(
                "QueueTest: queue {i} names no topic or a negative queue id"
            ))),
            Err(RulesError::DuplicateName(k)) => Err(PyValueError::new_err(format!(
                "QueueTest: topic name {k} is listed twice"
            ))),
        }
    }
}

/// test_records(buf, topic_pos, topic_len, sysflag, queue_id, queue_offset, test, kept) -> records kept, or
/// -(row + 1) for a row whose topic lies outside `buf` (inputs int64; `kept`: uint8, 1 where kept)
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn test_records(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    topic_pos: &Bound<'_, PyAny>,
    topic_len: &Bound<'_, PyAny>,
    sysflag: &Bound<'_, PyAny>,
    queue_id: &Bound<'_, PyAny>,
    queue_offset: &Bound<'_, PyAny>,
    test: &Bound<'_, QueueTest>,
    kept: &Bound<'_, PyAny>,
) -> PyResult<i64> {
    let buf = View::<u8>::read(buf)?;
    let inputs = [topic_pos, topic_len, sysflag, queue_id, queue_offset]
        .into_iter()
        .map(View::<i64>::read)
        .collect::<PyResult<Vec<_>>>()?;
    let spans: Vec<_> = std::iter::once(buf.span())
        .chain(inputs.iter().map(View::span))
        .collect();
    let mut kept = View::<u8>::write(kept, &spans)?;
    let [pos, len, flags, qid, offset] = [0, 1, 2, 3, 4].map(|i| inputs[i].slice());
    let (bytes, out, rules) = (buf.slice(), kept.slice_mut(), &test.get().0);
    let result =
        py.detach(|| queue_test::test_records(bytes, pos, len, flags, qid, offset, rules, out));
    match result {
        Ok(count) => Ok(count as i64),
        Err(GatherError::OutOfRange(row)) => Ok(-(row as i64) - 1),
        Err(_) => Err(PyValueError::new_err(
            "test_records: the inputs and `kept` differ in length",
        )),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<QueueTest>()?;
    m.add_function(wrap_pyfunction!(test_records, m)?)?;
    Ok(())
}
