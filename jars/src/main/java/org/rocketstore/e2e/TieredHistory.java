package org.rocketstore.e2e;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.Message;

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
}
