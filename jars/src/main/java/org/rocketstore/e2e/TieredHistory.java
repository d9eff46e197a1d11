package org.rocketstore.e2e;

import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.impl.MQAdminImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.BoundaryType;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * The harness commands of the tiered-history tests: enough bytes to fill several commit-log files quickly.
 */
final class TieredHistory {
    private TieredHistory() {
    }

    /** Messages FROM..FROM+N-1 with bodies of {@code bodyBytes} bytes, sent uncompressed. */
    static void bulk(String namesrv, String topic, int from, int count, int bodyBytes) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("e2e-bulk");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(15_000);
        producer.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        producer.setMaxMessageSize(4 * 1024 * 1024);
        producer.start();
        try {
            for (int i = from; i < from + count; i++) {
                Message m = Harness.message(topic, i, bodyBytes);
                Harness.sent("bulk", m, producer.send(m));
            }
        } finally {
            producer.shutdown();
        }
    }

    /** searchOffset (the broker's getOffsetInQueueByTime) of queue QUEUE at each time, lower and upper boundary. */
    static void byTime(String namesrv, String topic, int queueId, String[] times) throws Exception {
        DefaultMQProducer client = new DefaultMQProducer("e2e-by-time");
        client.setNamesrvAddr(namesrv);
        client.start();
        MessageQueue queue = null;
        for (MessageQueue mq : client.fetchPublishMessageQueues(topic)) {
            if (mq.getQueueId() == queueId) {
                queue = mq;
            }
        }
        if (queue == null) {
            throw new IllegalArgumentException("no queue " + queueId + " of " + topic);
        }
        MQAdminImpl admin = client.getDefaultMQProducerImpl().getMqClientFactory().getMQAdminImpl();
        for (String time : times) {
            long timestamp = Long.parseLong(time);
            Map<String, Object> line = new TreeMap<>();
            line.put("topic", topic);
            line.put("queueId", queueId);
            line.put("timestamp", timestamp);
            line.put("lower", admin.searchOffset(queue, timestamp, BoundaryType.LOWER));
            line.put("upper", admin.searchOffset(queue, timestamp, BoundaryType.UPPER));
            Harness.print("offset-at", line);
        }
        client.shutdown();
    }
}
