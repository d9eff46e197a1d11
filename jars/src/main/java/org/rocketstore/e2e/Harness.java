package org.rocketstore.e2e;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.store.OffsetStore;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.OffsetWrapper;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The end-to-end tests' driver of Apache RocketMQ's own Java client. One command a run; every message sent or
 * received is printed as one JSON line on stdout (the tests parse them), diagnostics go to stderr.
 *
 * <pre>
 *   produce     NAMESRV TOPIC COUNT      keyed/tagged messages with user properties, a delayed message, two
 *                                        committed and one rolled-back transaction, a batch, large bodies
 *                                        (compressed by the client) - one "sent" line each
 *   trickle     NAMESRV TOPIC FROM N MS  plain messages FROM..FROM+N-1, one every MS milliseconds
 *   bulk        NAMESRV TOPIC FROM N B   plain messages FROM..FROM+N-1 with uncompressed bodies of B bytes
 *   transactions NAMESRV TOPIC N MS      N transactional messages whose local transaction answers COMMIT,
 *                                        ROLLBACK or UNKNOW in turn (decision property); the producer stays up MS
 *                                        milliseconds answering the broker's checks the same ("checked" lines)
 *   timers      NAMESRV TOPIC N MS...    N messages per delay MS: each delivered MS milliseconds after it is sent
 *                                        (setDeliverTimeMs, the 5.x timer wheel)
 *   traced      NAMESRV TOPIC N          N messages from a producer with message trace on (enableMsgTrace), then
 *                                        a push consumer with trace on (group e2e-traced-consumer) receives them:
 *                                        the clients' trace records go to RMQ_SYS_TRACE_TOPIC
 *   compacted   NAMESRV TOPIC N KEYS     creates TOPIC with cleanup.policy=COMPACTION (2 queues), sends N messages
 *                                        keyed k0..k(KEYS-1) in turn ("sent"), then a lite pull consumer reads
 *                                        the topic from its first offset as the broker serves a compaction topic
 *                                        (from its compaction log) until nothing new comes for 10 s ("received")
 *   compaction-history, compaction-read     see CompactionHistory
 *   push        NAMESRV GROUP TOPIC N    a push consumer from the first offset until N messages arrived
 *   pull        NAMESRV GROUP TOPIC N    a lite pull consumer (auto commit) likewise
 *   by-key      NAMESRV TOPIC KEY        queryMessage by key (no lines when the broker finds none)
 *   by-id       NAMESRV TOPIC MSGID      viewMessage by (offset) message id
 *   by-time     NAMESRV TOPIC QUEUE T... searchOffset at each store time T (ms), lower and upper boundary
 *   offsets     NAMESRV GROUP            the broker's committed consumer offsets of GROUP
 *   brokers     NAMESRV                  the brokers registered with the name server
 * </pre>
 */
public final class Harness {
    private static final long TIMEOUT_MS = 90_000;

    private Harness() {
    }

    public static void main(String[] args) throws Exception {
        int rc = 0;
        try {
            switch (args[0]) {
                case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]));
                case "trickle" -> trickle(args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]),
                    Long.parseLong(args[5]));
                case "bulk" -> TieredHistory.bulk(args[1], args[2], Integer.parseInt(args[3]),
                    Integer.parseInt(args[4]), Integer.parseInt(args[5]));
                case "transactions" -> transactions(args[1], args[2], Integer.parseInt(args[3]),
                    Long.parseLong(args[4]));
                case "timers" -> timers(args[1], args[2], Integer.parseInt(args[3]),
                    java.util.Arrays.stream(args, 4, args.length).mapToLong(Long::parseLong).toArray());
                case "traced" -> traced(args[1], args[2], Integer.parseInt(args[3]));
                case "compacted" -> compacted(args[1], args[2], Integer.parseInt(args[3]),
                    Integer.parseInt(args[4]));
                case "compaction-history" -> CompactionHistory.history(args[1], args[2], Integer.parseInt(args[3]),
                    Integer.parseInt(args[4]), Integer.parseInt(args[5]), Integer.parseInt(args[6]));
                case "compaction-read" -> CompactionHistory.read(args[1], args[2], args[3]);
                case "push" -> push(args[1], args[2], args[3], Integer.parseInt(args[4]));
                case "pull" -> pull(args[1], args[2], args[3], Integer.parseInt(args[4]));
                case "by-key" -> byKey(args[1], args[2], args[3]);
                case "by-id" -> byId(args[1], args[2], args[3]);
                case "by-time" -> TieredHistory.byTime(args[1], args[2], Integer.parseInt(args[3]),
                        java.util.Arrays.copyOfRange(args, 4, args.length));
                case "offsets" -> offsets(args[1], args[2]);
                case "brokers" -> brokers(args[1]);
                default -> throw new IllegalArgumentException("unknown command " + args[0]);
            }
        } catch (Throwable e) {
            e.printStackTrace();
            rc = 1;
        }
        System.out.flush();
        // the client's non-daemon threads would keep the JVM alive
        Runtime.getRuntime().halt(rc);
    }

    // ---------------------------------------------------------------- producing

    static Message message(String topic, int i, int bodyBytes) {
        StringBuilder body = new StringBuilder("message-" + i + "-");
        while (body.length() < bodyBytes) {
            body.append((char) ('a' + (body.length() * 7 + i) % 26));
        }
        Message m = new Message(topic, "tag" + (i % 3), "key-" + i + " k" + (i % 5),
                body.toString().getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("index", Integer.toString(i));
        m.putUserProperty("colour", i % 2 == 0 ? "red" : "blue");
        return m;
    }

    private static void produce(String namesrv, String topic, int count) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("e2e-producer");
        producer.setNamesrvAddr(namesrv);
        producer.setCompressMsgBodyOverHowmuch(4096);
        producer.setSendMsgTimeout(15_000);
        producer.start();
        int i = 0;
        try {
            for (; i < count; i++) {
                Message m = message(topic, i, 16 + (i * 37) % 200);
                sent("plain", m, producer.send(m));
            }
            for (int size : new int[] {5_000, 300_000}) {  // over 4 KiB: zlib-compressed by the client
                Message m = message(topic, i++, size);
                sent("large", m, producer.send(m));
            }
            List<Message> batch = new ArrayList<>();
            for (int b = 0; b < 4; b++) {
                batch.add(message(topic, i++, 40));
            }
            SendResult batchResult = producer.send(batch);
            String[] ids = batchResult.getMsgId().split(",");
            String[] offsetIds = batchResult.getOffsetMsgId().split(",");
            for (int b = 0; b < batch.size(); b++) {
                Map<String, Object> line = describe(batch.get(b));
                line.put("kind", "batch");
                line.put("msgId", ids[b]);
                line.put("offsetMsgId", offsetIds[b]);
                line.put("queueId", batchResult.getMessageQueue().getQueueId());
                line.put("queueOffset", batchResult.getQueueOffset() + b);
                print("sent", line);
            }
            Message delayed = message(topic, i++, 30);
            delayed.setDelayTimeLevel(1);  // 1 s
            sent("delayed", delayed, producer.send(delayed));
        } finally {
            producer.shutdown();
        }

        TransactionMQProducer tx = new TransactionMQProducer("e2e-tx-producer");
        tx.setNamesrvAddr(namesrv);
        tx.setSendMsgTimeout(15_000);
        tx.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return "commit".equals(msg.getUserProperty("decision"))
                    ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return "commit".equals(msg.getUserProperty("decision"))
                    ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        tx.start();
        try {
            for (String decision : new String[] {"commit", "rollback", "commit"}) {
                Message m = message(topic, i++, 50);
                m.putUserProperty("decision", decision);
                sent(decision.equals("commit") ? "tx-commit" : "tx-rollback", m, tx.sendMessageInTransaction(m, null));
            }
        } finally {
            tx.shutdown();
        }
    }

    private static void trickle(String namesrv, String topic, int from, int count, long pauseMs) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("e2e-trickle");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(15_000);
        producer.start();
        try {
            for (int i = from; i < from + count; i++) {
                Message m = message(topic, i, 20 + i % 100);
                sent("plain", m, producer.send(m));
                System.out.flush();
                Thread.sleep(pauseMs);
            }
        } finally {
            producer.shutdown();
        }
    }

    private static final String[] DECISIONS = {"commit", "rollback", "unknown"};

    private static LocalTransactionState decide(Message msg) {
        return switch (msg.getUserProperty("decision")) {
            case "commit" -> LocalTransactionState.COMMIT_MESSAGE;
            case "rollback" -> LocalTransactionState.ROLLBACK_MESSAGE;
            default -> LocalTransactionState.UNKNOW;
        };
    }

    private static void transactions(String namesrv, String topic, int count, long stayMs) throws Exception {
        TransactionMQProducer tx = new TransactionMQProducer("e2e-tx-pending");
        tx.setNamesrvAddr(namesrv);
        tx.setSendMsgTimeout(15_000);
        tx.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return decide(msg);
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                Map<String, Object> line = new TreeMap<>();
                line.put("transactionId", msg.getTransactionId());
                line.put("uniqKey", msg.getProperty("UNIQ_KEY"));
                line.put("index", msg.getUserProperty("index"));
                line.put("checkTimes", msg.getProperty("TRANSACTION_CHECK_TIMES"));
                line.put("queueOffset", msg.getQueueOffset());
                line.put("decision", msg.getUserProperty("decision"));
                print("checked", line);
                return decide(msg);  // the local transaction's state: UNKNOW ones stay pending
            }
        });
        tx.start();
        try {
            for (int i = 0; i < count; i++) {
                Message m = message(topic, i, 30 + i % 50);
                m.putUserProperty("decision", DECISIONS[i % DECISIONS.length]);
                SendResult r = tx.sendMessageInTransaction(m, null);
                sent("tx-" + DECISIONS[i % DECISIONS.length], m, r);
            }
            Thread.sleep(stayMs);
        } finally {
            tx.shutdown();
        }
    }

    private static void timers(String namesrv, String topic, int count, long[] delaysMs) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("e2e-timer");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(15_000);
        producer.start();
        int i = 0;
        try {
            for (long delay : delaysMs) {
                for (int n = 0; n < count; n++, i++) {
                    Message m = message(topic, i, 25 + i % 40);
                    long deliverAt = System.currentTimeMillis() + delay;
                    m.setDeliverTimeMs(deliverAt);
                    m.putUserProperty("delayMs", Long.toString(delay));
                    SendResult r = producer.send(m);
                    sent("timer", m, r);
                }
            }
        } finally {
            producer.shutdown();
        }
    }

    private static void traced(String namesrv, String topic, int count) throws Exception {
        awaitRoute(namesrv, TRACE_TOPIC);  // a trace sent before the trace topic has a route is dropped by the client
        DefaultMQProducer producer = new DefaultMQProducer("e2e-traced", true, null);
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(15_000);
        producer.start();
        try {
            for (int i = 0; i < count; i++) {
                Message m = message(topic, i, 20 + i % 30);
                sent("traced", m, producer.send(m));
            }
        } finally {
            producer.shutdown();  // flushes the trace dispatcher
        }
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("e2e-traced-consumer", true, null);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        Set<String> seen = ConcurrentHashMap.newKeySet();
        CountDownLatch done = new CountDownLatch(count);
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                if (seen.add(m.getQueueId() + "/" + m.getQueueOffset())) {
                    received(m);
                    done.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        boolean all = done.await(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        Thread.sleep(2_000);  // the trace dispatcher sends in batches
        consumer.shutdown();
        if (!all) {
            throw new IllegalStateException("traced consumer received " + seen.size() + " of " + count);
        }
    }

    /** The trace topic a broker with traceTopicEnable creates (TopicValidator.RMQ_SYS_TRACE_TOPIC). */
    private static final String TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC";

    /** Waits until the name server has a route for {@code topic} (the broker registers new topics with its next
     * registration, every 30 s by default). */
    private static void awaitRoute(String namesrv, String topic) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.start();
        try {
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            MQClientException last = null;
            while (System.currentTimeMillis() < deadline) {
                try {
                    if (!admin.examineTopicRouteInfo(topic).getBrokerDatas().isEmpty()) {
                        return;
                    }
                } catch (MQClientException e) {
                    last = e;  // TOPIC_NOT_EXIST until the broker's next registration
                }
                Thread.sleep(500);
            }
            throw new IllegalStateException("no route for " + topic + " on " + namesrv, last);
        } finally {
            admin.shutdown();
        }
    }

    private static void compacted(String namesrv, String topic, int count, int keys) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.start();
        org.apache.rocketmq.common.TopicConfig config = new org.apache.rocketmq.common.TopicConfig(topic, 2, 2);
        config.setAttributes(Map.of("+cleanup.policy", "COMPACTION"));
        for (BrokerData b : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
            admin.createAndUpdateTopicConfig(b.getBrokerAddrs().get(0L), config);
        }
        Thread.sleep(3_000);  // the route reaches the name server with the next registration
        DefaultMQProducer producer = new DefaultMQProducer("e2e-compacted");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(15_000);
        producer.start();
        try {
            for (int i = 0; i < count; i++) {
                Message m = new Message(topic, "tag" + (i % 2), "k" + (i % keys),
                    ("value-" + i).getBytes(StandardCharsets.UTF_8));
                m.putUserProperty("index", Integer.toString(i));
                sent("compacted", m, producer.send(m));
            }
        } finally {
            producer.shutdown();
        }
        DefaultLitePullConsumer consumer = startLitePull(namesrv, "e2e-compacted-reader", topic);
        Set<String> seen = new HashSet<>();
        long quietUntil = System.currentTimeMillis() + 10_000;
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        while (System.currentTimeMillis() < quietUntil && System.currentTimeMillis() < deadline) {
            for (MessageExt m : consumer.poll(1_000)) {
                if (seen.add(m.getQueueId() + "/" + m.getQueueOffset())) {
                    received(m);
                    quietUntil = System.currentTimeMillis() + 10_000;
                }
            }
        }
        consumer.shutdown();
        admin.shutdown();
    }

    static void sent(String kind, Message m, SendResult r) {
        if (r.getSendStatus() != SendStatus.SEND_OK) {
            throw new IllegalStateException("send status " + r.getSendStatus() + " for " + kind);
        }
        Map<String, Object> line = describe(m);
        line.put("kind", kind);
        line.put("msgId", r.getMsgId());
        line.put("offsetMsgId", r.getOffsetMsgId());
        line.put("queueId", r.getMessageQueue().getQueueId());
        line.put("queueOffset", r.getQueueOffset());
        line.put("transactionId", r.getTransactionId());
        print("sent", line);
    }

    // ---------------------------------------------------------------- consuming

    private static void push(String namesrv, String group, String topic, int expected) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.setConsumeThreadMin(1);
        consumer.setConsumeThreadMax(1);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        Map<Integer, Long> next = new ConcurrentHashMap<>();  // queue id -> the offset after the last one received
        CountDownLatch done = new CountDownLatch(expected);
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                if (topic.equals(m.getTopic())) {
                    next.merge(m.getQueueId(), m.getQueueOffset() + 1, Math::max);
                }
                if (seen.add(m.getQueueId() + "/" + m.getQueueOffset())) {
                    received(m);
                    done.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        boolean all = done.await(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        awaitAcknowledged(consumer, topic, next);
        consumer.shutdown();  // persists the consumed offsets on the broker
        if (!all) {
            throw new IllegalStateException("push consumer received " + seen.size() + " of " + expected);
        }
    }

    /**
     * Waits (at most 30 s) until the push consumer's offset store holds, for every queue of {@code topic} a message
     * was received from, the offset after the last one received: a listener's return is acknowledged after it, and
     * the shutdown persists only what the store holds by then.
     */
    private static void awaitAcknowledged(DefaultMQPushConsumer consumer, String topic, Map<Integer, Long> next)
            throws Exception {
        OffsetStore store = consumer.getDefaultMQPushConsumerImpl().getOffsetStore();
        long deadline = System.currentTimeMillis() + 30_000;
        while (System.currentTimeMillis() < deadline) {
            boolean acknowledged = true;
            for (MessageQueue mq : consumer.fetchSubscribeMessageQueues(topic)) {
                Long want = next.get(mq.getQueueId());
                if (want != null && store.readOffset(mq, ReadOffsetType.READ_FROM_MEMORY) < want) {
                    acknowledged = false;
                }
            }
            if (acknowledged) {
                return;
            }
            Thread.sleep(100);
        }
    }

    /** A started lite pull consumer of every message of {@code topic} from its first offset, committing nothing. */
    static DefaultLitePullConsumer startLitePull(String namesrv, String group, String topic) throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setAutoCommit(false);
        consumer.subscribe(topic, "*");
        consumer.start();
        return consumer;
    }

    private static void pull(String namesrv, String group, String topic, int expected) throws Exception {
        DefaultLitePullConsumer consumer = startLitePull(namesrv, group, topic);
        Set<String> seen = new HashSet<>();
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        while (seen.size() < expected && System.currentTimeMillis() < deadline) {
            for (MessageExt m : consumer.poll(1_000)) {
                if (seen.add(m.getQueueId() + "/" + m.getQueueOffset())) {
                    received(m);
                }
            }
            consumer.commit();
        }
        consumer.commitSync();
        Thread.sleep(500);
        consumer.shutdown();
        if (seen.size() < expected) {
            throw new IllegalStateException("pull consumer received " + seen.size() + " of " + expected);
        }
    }

    static void received(MessageExt m) {
        Map<String, Object> line = describe(m);
        line.put("msgId", m.getMsgId());
        line.put("offsetMsgId", m.getMsgId().equals(m.getProperty("UNIQ_KEY")) ? null : m.getMsgId());
        line.put("queueId", m.getQueueId());
        line.put("queueOffset", m.getQueueOffset());
        line.put("commitLogOffset", m.getCommitLogOffset());
        line.put("reconsumeTimes", m.getReconsumeTimes());
        print("received", line);
    }

    // ---------------------------------------------------------------- queries and offsets

    private static DefaultMQProducer queryClient(String namesrv) throws Exception {
        DefaultMQProducer client = new DefaultMQProducer("e2e-query");
        client.setNamesrvAddr(namesrv);
        client.start();
        return client;
    }

    @SuppressWarnings("deprecation")
    private static void byKey(String namesrv, String topic, String key) throws Exception {
        DefaultMQProducer client = queryClient(namesrv);
        try {
            for (MessageExt m : client.queryMessage(topic, key, 64, 0, Long.MAX_VALUE).getMessageList()) {
                received(m);
            }
        } catch (MQClientException e) {
            if (e.getResponseCode() != ResponseCode.NO_MESSAGE) {
                throw e;
            }
            // the broker found no message: an empty answer, no lines
        }
    }

    @SuppressWarnings("deprecation")
    private static void byId(String namesrv, String topic, String msgId) throws Exception {
        DefaultMQProducer client = queryClient(namesrv);
        received(client.viewMessage(topic, msgId));
    }

    private static void offsets(String namesrv, String group) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.start();
        ConsumeStats stats = admin.examineConsumeStats(group);
        for (Map.Entry<MessageQueue, OffsetWrapper> e : new TreeMap<>(stats.getOffsetTable()).entrySet()) {
            Map<String, Object> line = new TreeMap<>();
            line.put("topic", e.getKey().getTopic());
            line.put("queueId", e.getKey().getQueueId());
            line.put("brokerOffset", e.getValue().getBrokerOffset());
            line.put("consumerOffset", e.getValue().getConsumerOffset());
            print("offset", line);
        }
    }

    private static void brokers(String namesrv) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.start();
        for (BrokerData b : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
            Map<String, Object> line = new TreeMap<>();
            line.put("cluster", b.getCluster());
            line.put("brokerName", b.getBrokerName());
            line.put("addresses", new ArrayList<>(b.getBrokerAddrs().values()));
            print("broker", line);
        }
    }

    // ---------------------------------------------------------------- JSON lines

    private static Map<String, Object> describe(Message m) {
        Map<String, Object> line = new TreeMap<>();
        line.put("topic", m.getTopic());
        line.put("tags", m.getTags());
        List<String> keys = new ArrayList<>();
        if (m.getKeys() != null) {
            Collections.addAll(keys, m.getKeys().split(" "));
        }
        line.put("keys", keys);
        line.put("properties", new TreeMap<>(m.getProperties()));
        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();  // a message without a body decodes to null
        line.put("bodyLength", body.length);
        line.put("bodySha256", sha256(body));
        return line;
    }

    private static String sha256(byte[] data) {
        try {
            StringBuilder hex = new StringBuilder();
            for (byte b : MessageDigest.getInstance("SHA-256").digest(data)) {
                hex.append(String.format("%02x", b));
            }
            return hex.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static synchronized void print(String event, Map<String, Object> fields) {
        StringBuilder out = new StringBuilder("{\"event\":").append(json(event));
        for (Map.Entry<String, Object> e : fields.entrySet()) {
            out.append(',').append(json(e.getKey())).append(':').append(json(e.getValue()));
        }
        System.out.println(out.append('}'));
    }

    private static String json(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Number || v instanceof Boolean) {
            return v.toString();
        }
        if (v instanceof Map<?, ?> map) {
            StringBuilder s = new StringBuilder("{");
            for (Map.Entry<?, ?> e : map.entrySet()) {
                s.append(s.length() > 1 ? "," : "").append(json(e.getKey().toString())).append(':')
                    .append(json(e.getValue()));
            }
            return s.append('}').toString();
        }
        if (v instanceof List<?> list) {
            StringBuilder s = new StringBuilder("[");
            for (Object o : list) {
                s.append(s.length() > 1 ? "," : "").append(json(o));
            }
            return s.append(']').toString();
        }
        StringBuilder s = new StringBuilder("\"");
        for (char c : v.toString().toCharArray()) {
            switch (c) {
                case '"' -> s.append("\\\"");
                case '\\' -> s.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        s.append(String.format("\\u%04x", (int) c));
                    } else {
                        s.append(c);
                    }
                }
            }
        }
        return s.append('"').toString();
    }
}
