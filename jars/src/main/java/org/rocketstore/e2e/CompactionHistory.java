package org.rocketstore.e2e;

import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.impl.CommunicationMode;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageBatch;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.header.SendMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The harness commands of the compaction-history test: a compaction topic whose early keys end up kept only in
 * the broker's compaction log once the commit log they were written to expires.
 *
 * <pre>
 *   compaction-history NAMESRV TOPIC OLD FILLERS ROUNDS BYTES
 *       creates TOPIC (cleanup.policy=COMPACTION, 2 queues); sends keys old-0..old-(OLD-1) twice each, deletes
 *       old-0 (a message without a body), then ROUNDS rounds of keys f0..f(FILLERS-1) with BYTES-byte bodies,
 *       and deletes f0. A key always goes to queue (its number % 2). One "sent" line per message.
 *   compaction-read NAMESRV GROUP TOPIC
 *       a lite pull consumer reads TOPIC from its first offset, as the broker serves a compaction topic, until
 *       nothing new comes for 10 s; one "received" line per message
 * </pre>
 */
final class CompactionHistory {
    private static final int QUEUES = 2;

    private CompactionHistory() {
    }

    static void history(String namesrv, String topic, int old, int fillers, int rounds, int bodyBytes)
        throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.start();
        String brokerName = null;
        TopicConfig config = new TopicConfig(topic, QUEUES, QUEUES);
        config.setAttributes(Map.of("+cleanup.policy", "COMPACTION"));
        for (BrokerData b : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
            admin.createAndUpdateTopicConfig(b.getBrokerAddrs().get(MixAll.MASTER_ID), config);
            brokerName = b.getBrokerName();
        }
        admin.shutdown();
        Thread.sleep(3_000);  // the route reaches the name server with the next registration
        DefaultMQProducer producer = new DefaultMQProducer("e2e-compaction-history");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(15_000);
        producer.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        producer.start();
        try {
            int index = 0;
            for (int version = 0; version < 2; version++) {
                for (int k = 0; k < old; k++) {
                    put(producer, brokerName, topic, "old-" + k, k, index++, value("old-" + k, version, 40));
                }
            }
            delete(producer, brokerName, topic, "old-0", 0, index++);
            for (int round = 0; round < rounds; round++) {
                for (int k = 0; k < fillers; k++) {
                    put(producer, brokerName, topic, "f" + k, k, index++, value("f" + k, round, bodyBytes));
                }
            }
            delete(producer, brokerName, topic, "f0", 0, index);
        } finally {
            producer.shutdown();
        }
    }

    private static byte[] value(String key, int version, int bytes) {
        StringBuilder body = new StringBuilder(key + "=v" + version + ";");
        while (body.length() < bytes) {
            body.append((char) ('a' + (body.length() * 11 + version) % 26));
        }
        return body.toString().getBytes(StandardCharsets.UTF_8);
    }

    private static Message message(String topic, String key, int index, byte[] body) {
        Message m = new Message(topic, "tag" + (index % 2), key, body);
        m.putUserProperty("index", Integer.toString(index));
        return m;
    }

    private static void put(DefaultMQProducer producer, String brokerName, String topic, String key, int keyNumber,
        int index, byte[] body) throws Exception {
        Message m = message(topic, key, index, body);
        Harness.sent("compacted", m, producer.send(m, new MessageQueue(topic, brokerName, keyNumber % QUEUES)));
    }

    /**
     * A message without a body deletes its key from the compaction log. The client refuses to send an empty body
     * (Validators.checkMessage) and the broker cannot take one as a single message (the request has no body), so
     * it goes as the only message of a batch, through the client's request API as the producer sends a batch.
     */
    private static void delete(DefaultMQProducer producer, String brokerName, String topic, String key,
        int keyNumber, int index) throws Exception {
        Message m = message(topic, key, index, new byte[0]);
        MessageClientIDSetter.setUniqID(m);
        MessageBatch batch = MessageBatch.generateFromList(List.of(m));
        MessageClientIDSetter.setUniqID(batch);
        batch.setBody(batch.encode());
        MQClientInstance client = producer.getDefaultMQProducerImpl().getMqClientFactory();
        client.updateTopicRouteInfoFromNameServer(topic);
        String addr = client.findBrokerAddressInPublish(brokerName);
        SendMessageRequestHeader header = new SendMessageRequestHeader();
        header.setProducerGroup(producer.getProducerGroup());
        header.setTopic(topic);
        header.setDefaultTopic(producer.getCreateTopicKey());
        header.setDefaultTopicQueueNums(producer.getDefaultTopicQueueNums());
        header.setQueueId(keyNumber % QUEUES);
        header.setSysFlag(0);
        header.setBornTimestamp(System.currentTimeMillis());
        header.setFlag(batch.getFlag());
        header.setProperties(MessageDecoder.messageProperties2String(batch.getProperties()));
        header.setReconsumeTimes(0);
        header.setBatch(true);
        header.setBrokerName(brokerName);
        SendResult r = client.getMQClientAPIImpl().sendMessage(addr, brokerName, batch, header, 15_000,
            CommunicationMode.SYNC, null, producer.getDefaultMQProducerImpl());
        Harness.sent("delete", m, r);
    }

    static void read(String namesrv, String group, String topic) throws Exception {
        DefaultLitePullConsumer consumer = Harness.startLitePull(namesrv, group, topic);
        Set<String> seen = new HashSet<>();
        long quietUntil = System.currentTimeMillis() + 10_000;
        long deadline = System.currentTimeMillis() + 120_000;
        while (System.currentTimeMillis() < quietUntil && System.currentTimeMillis() < deadline) {
            for (MessageExt m : consumer.poll(1_000)) {
                if (seen.add(m.getQueueId() + "/" + m.getQueueOffset())) {
                    Harness.received(m);
                    quietUntil = System.currentTimeMillis() + 10_000;
                }
            }
        }
        consumer.shutdown();
    }
}
