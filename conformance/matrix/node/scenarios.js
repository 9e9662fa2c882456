// The client matrix's Node program: KafkaJS runs the scenario contract (conformance/matrix/README.md).
//
//   node scenarios.js BOOTSTRAP PREFIX
//
// One JSON line per scenario on stdout, KafkaJS's logs (WARN and up) on stderr. KafkaJS has no
// assign-mode consumer: records are read back by a consumer of a fresh group instead. Its codecs
// are gzip (built in) and snappy (kafkajs-snappy, pure JS); lz4 and zstd need native plugins, which
// this matrix does not build, so those scenarios are unsupported.
'use strict'

const { Kafka, CompressionTypes, CompressionCodecs, logLevel, ConfigResourceTypes, AclResourceTypes,
  AclOperationTypes, AclPermissionTypes, ResourcePatternTypes } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec

const CODECS = ['none', 'gzip', 'snappy', 'lz4', 'zstd']
const RECORD_COUNT = 100
const TXN_RECORDS = 10
const SECOND_BATCH = 10
const RETENTION_AFTER = '3600000'
const SCENARIO_TIMEOUT_MS = Number(process.env.MATRIX_SCENARIO_TIMEOUT_MS || 20000)
// Kafka's ConfigSource numbers (DescribeConfigs v1+).
const CONFIG_SOURCES = ['UNKNOWN', 'DYNAMIC_TOPIC_CONFIG', 'DYNAMIC_BROKER_CONFIG', 'DYNAMIC_DEFAULT_BROKER_CONFIG',
  'STATIC_BROKER_CONFIG', 'DEFAULT_CONFIG', 'DYNAMIC_BROKER_LOGGER_CONFIG']

class Unsupported extends Error {}

const [bootstrap, prefix] = process.argv.slice(2)
if (!bootstrap || !prefix) {
  process.stderr.write('usage: node scenarios.js BOOTSTRAP PREFIX\n')
  process.exit(2)
}

const logCreator = () => ({ namespace, level, label, log }) => {
  process.stderr.write(`${label} [${namespace}] ${log.message} ${log.error || ''}\n`)
}
const kafka = new Kafka({
  clientId: 'kafkapy-matrix', brokers: [bootstrap], logLevel: logLevel.WARN, logCreator,
  connectionTimeout: 5000, requestTimeout: 10000, retry: { retries: 3, initialRetryTime: 100, maxRetryTime: 1000 }
})

function record (i) {
  const bytes = Buffer.alloc(512)
  for (let b = 0; b < 512; b++) bytes[b] = b % 256
  return { key: Buffer.from(`key-${i}`), value: Buffer.concat([Buffer.from(`value-${i}-`), bytes]) }
}

function messages (start, count) {
  const out = []
  for (let i = start; i < start + count; i++) out.push({ ...record(i), partition: 0, headers: { i: String(i) } })
  return out
}

function roundTrips (msgs, start) {
  return msgs.every((m, n) => {
    const want = record(start + n)
    return Buffer.compare(m.key, want.key) === 0 && Buffer.compare(m.value, want.value) === 0
  })
}

// The canonical name of an error: Kafka's error type for protocol errors (also when wrapped), else
// the class name and message (KafkaJS's own text for an error code; the run's PREFIX taken out).
function errName (err) {
  if (!err) return 'none'
  if (err.type) return err.type
  if (err.cause) return errName(err.cause)
  if (err.originalError) return errName(err.originalError)
  return `${err.name}: ${err.message}`.split(prefix).join('PREFIX')
}

async function withAdmin (fn) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    return await fn(admin)
  } finally {
    await admin.disconnect()
  }
}

async function setupTopic (topic, partitions = 1) {
  await withAdmin(admin => admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
    waitForLeaders: true }))
}

async function withProducer (config, fn) {
  const producer = kafka.producer({ allowAutoTopicCreation: false, ...config })
  await producer.connect()
  try {
    return await fn(producer)
  } finally {
    await producer.disconnect()
  }
}

// Reads `count` records with a consumer of `group` (fresh group: from the beginning); then waits a
// little for records past `count`, which would be a wrong answer.
async function readGroup (topic, group, count, { readUncommitted = false, commit = false, settleMs = 1000 } = {}) {
  const consumer = kafka.consumer({ groupId: group, readUncommitted, maxWaitTimeInMs: 200, sessionTimeout: 10000,
    rebalanceTimeout: 5000, heartbeatInterval: 1000 })
  await consumer.connect()
  const got = []
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    let reached
    const enough = new Promise(resolve => { reached = resolve })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        got.push(message)
        if (got.length >= count) reached()
      }
    })
    const deadline = new Promise(resolve => setTimeout(resolve, 15000))
    await Promise.race([enough, deadline])
    if (settleMs) await new Promise(resolve => setTimeout(resolve, settleMs))
    if (commit && got.length) {
      const next = (BigInt(got[got.length - 1].offset) + 1n).toString()
      await consumer.commitOffsets([{ topic, partition: 0, offset: next }])
    }
  } finally {
    await consumer.disconnect()
  }
  return got
}

const compressionOf = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy }

const scenarios = {
  async metadata () {
    return withAdmin(async admin => {
      const cluster = await admin.describeCluster()
      const topics = await admin.listTopics()
      return { brokers: cluster.brokers.length, controller: cluster.controller !== null && cluster.controller >= 0,
        topics_listed: Array.isArray(topics) }
    })
  },

  async create_delete_topic () {
    const topic = `${prefix}-created`
    return withAdmin(async admin => {
      await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true })
      const md = await admin.fetchTopicMetadata({ topics: [topic] })
      const partitions = md.topics[0].partitions.length
      // KafkaJS answers TOPIC_ALREADY_EXISTS with `false` instead of an error.
      const again = await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }] })
      await admin.deleteTopics({ topics: [topic] })
      let gone = false
      for (let n = 0; n < 50 && !gone; n++) {
        gone = !(await admin.listTopics()).includes(topic)
        if (!gone) await new Promise(resolve => setTimeout(resolve, 100))
      }
      return { partitions, create_twice_error: again === false ? 'TOPIC_ALREADY_EXISTS' : 'none', gone_after_delete: gone }
    })
  },

  async produce (codec) {
    if (!(codec in compressionOf)) throw new Unsupported(`KafkaJS has no ${codec} codec without a native plugin`)
    const topic = `${prefix}-produce-${codec}`
    await setupTopic(topic)
    const acked = await withProducer({ idempotent: true, maxInFlightRequests: 1 }, producer =>
      producer.send({ topic, acks: -1, compression: compressionOf[codec], messages: messages(0, RECORD_COUNT) }))
    const base = Number(acked[0].baseOffset)
    const got = await readGroup(topic, `${prefix}-read-${codec}`, RECORD_COUNT)
    return { first_offset: base, last_offset: base + RECORD_COUNT - 1, read: got.length, round_trip: roundTrips(got, 0),
      idempotent: true, headers_round_trip: got.every((m, n) => m.headers.i && m.headers.i.toString() === String(n)) }
  },

  async group_consume_commit () {
    const topic = `${prefix}-group`
    const group = `${prefix}-g`
    await setupTopic(topic)
    await withProducer({}, p => p.send({ topic, acks: -1, messages: messages(0, RECORD_COUNT) }))
    const first = await readGroup(topic, group, RECORD_COUNT, { commit: true, settleMs: 0 })
    const offsets = await withAdmin(admin => admin.fetchOffsets({ groupId: group, topics: [topic] }))
    const committed = Number(offsets[0].partitions.find(p => p.partition === 0).offset)
    await withProducer({}, p => p.send({ topic, acks: -1, messages: messages(RECORD_COUNT, SECOND_BATCH) }))
    const later = await readGroup(topic, group, SECOND_BATCH, { settleMs: 0 })
    return { read: first.length, committed, second_read: later.length,
      second_first_offset: later.length ? Number(later[0].offset) : null, second_round_trip: roundTrips(later, RECORD_COUNT) }
  },

  async transactions () {
    const topic = `${prefix}-txn`
    await setupTopic(topic)
    await withProducer({ transactionalId: `${prefix}-tx`, idempotent: true, maxInFlightRequests: 1 }, async producer => {
      for (const commit of [true, false]) {
        const txn = await producer.transaction()
        await txn.send({ topic, acks: -1, messages: messages(commit ? 0 : TXN_RECORDS, TXN_RECORDS) })
        if (commit) await txn.commit(); else await txn.abort()
      }
    })
    const committed = await readGroup(topic, `${prefix}-rc`, TXN_RECORDS)
    const uncommitted = await readGroup(topic, `${prefix}-ru`, 2 * TXN_RECORDS, { readUncommitted: true })
    return { read_committed: committed.length, read_uncommitted: uncommitted.length }
  },

  async admin_describe_configs () {
    const topic = `${prefix}-configs`
    await setupTopic(topic)
    return withAdmin(async admin => {
      const describe = async (type, name, configNames) => {
        const res = await admin.describeConfigs({ resources: [{ type, name, configNames }], includeSynonyms: false })
        const found = {}
        for (const e of res.resources[0].configEntries) {
          found[e.configName] = [e.configValue, CONFIG_SOURCES[e.configSource] || String(e.configSource)]
        }
        return found
      }
      const before = await describe(ConfigResourceTypes.TOPIC, topic, ['retention.ms', 'cleanup.policy'])
      const broker = await describe(ConfigResourceTypes.BROKER, '1', ['compression.type'])
      // KafkaJS 2.2 has AlterConfigs only (no IncrementalAlterConfigs).
      await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic,
        configEntries: [{ name: 'retention.ms', value: RETENTION_AFTER }] }] })
      const after = await describe(ConfigResourceTypes.TOPIC, topic, ['retention.ms', 'cleanup.policy'])
      return { retention_ms_before: before['retention.ms'], retention_ms_after: after['retention.ms'],
        cleanup_policy: before['cleanup.policy'], broker_compression_type: broker['compression.type'][0],
        alter_api: 'alter_configs', alter_result: 'OK' }
    })
  },

  async error_unknown_topic () {
    const topic = `${prefix}-missing`
    let describeError = 'none'
    await withAdmin(async admin => {
      try {
        await admin.fetchTopicMetadata({ topics: [topic] })
      } catch (err) {
        describeError = errName(err)
      }
    })
    let produceError = 'none'
    try {
      await withProducer({ retry: { retries: 1 } }, p => p.send({ topic, acks: -1, messages: [{ value: 'v' }] }))
    } catch (err) {
      produceError = errName(err)
    }
    return { describe_error: describeError, error: produceError }
  },

  async error_fenced_producer () {
    const topic = `${prefix}-fenced`
    await setupTopic(topic)
    const config = { transactionalId: `${prefix}-fenced-tx`, idempotent: true, maxInFlightRequests: 1, retry: { retries: 1 } }
    return withProducer(config, async first => {
      const txn = await first.transaction()
      await txn.send({ topic, acks: -1, messages: [{ value: 'first', partition: 0 }] })
      // The second producer's first transaction() runs InitProducerId, which fences the first.
      return withProducer(config, async second => {
        await second.transaction()
        try {
          await txn.send({ topic, acks: -1, messages: [{ value: 'again', partition: 0 }] })
          await txn.commit()
          return { error: 'none' }
        } catch (err) {
          return { error: errName(err) }
        }
      })
    })
  },

  async error_not_authorized () {
    if (process.env.MATRIX_AUTHORIZER !== '1') throw new Unsupported('no authorizer')
    const topic = `${prefix}-denied`
    await setupTopic(topic)
    await withAdmin(admin => admin.createAcls({ acl: [{ resourceType: AclResourceTypes.TOPIC, resourceName: topic,
      resourcePatternType: ResourcePatternTypes.LITERAL, principal: 'User:ANONYMOUS', host: '*',
      operation: AclOperationTypes.ALL, permissionType: AclPermissionTypes.DENY }] }))
    try {
      await withProducer({ retry: { retries: 1 } }, p => p.send({ topic, acks: -1, messages: [{ value: 'v', partition: 0 }] }))
      return { error: 'none' }
    } catch (err) {
      return { error: errName(err) }
    }
  }
}

async function runOne (name, fn) {
  let timer
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve({ scenario: name, status: 'fail', observed: {},
      detail: `timeout: not finished within ${SCENARIO_TIMEOUT_MS / 1000} s` }), SCENARIO_TIMEOUT_MS)
  })
  const run = fn().then(
    observed => ({ scenario: name, status: 'pass', observed, detail: '' }),
    err => err instanceof Unsupported
      ? { scenario: name, status: 'unsupported', observed: {}, detail: err.message }
      : { scenario: name, status: 'fail', observed: {}, detail: `${err.name}: ${err.message}` })
  try {
    return await Promise.race([run, timeout])
  } finally {
    clearTimeout(timer)
  }
}

async function main () {
  const only = new Set((process.env.MATRIX_SCENARIOS || '').split(',').filter(Boolean))
  const order = ['metadata', 'create_delete_topic', ...CODECS.map(c => `produce_${c}`), 'group_consume_commit',
    'transactions', 'admin_describe_configs', 'error_unknown_topic', 'error_fenced_producer', 'error_not_authorized']
  for (const name of order) {
    if (only.size && !only.has(name)) continue
    const fn = name.startsWith('produce_') ? () => scenarios.produce(name.slice('produce_'.length)) : scenarios[name]
    const result = await runOne(name, fn)
    process.stdout.write(JSON.stringify(result) + '\n')
  }
  process.exit(0)
}

main()
