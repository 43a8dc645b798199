/**
 * The message codec: every message of the protocol through encode -> frames ->
 * decode, the exact wire field names, and the envelope's error rules.
 */
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  decodeMessage,
  decodeValue,
  encodeMessage,
  jobSnapshotCodec,
  messageToJson,
} from '../../src/protocol/codec.js';
import { ProtocolError, ProtocolErrorCode } from '../../src/protocol/errors.js';
import { FrameDecoder } from '../../src/protocol/framing.js';
import type {
  AttemptSnapshot,
  JobSnapshot,
  Message,
  MessageOf,
  MessageType,
  WorkerSnapshot,
} from '../../src/protocol/messages.js';

const SEED_RANDOM_JSON = 0x5eed_0101;
const SEED_RANDOM_ENVELOPE = 0x5eed_0102;

const JOB: JobSnapshot = {
  jobId: 'job-1',
  taskType: 'SHA256',
  state: 'RUNNING',
  attempts: 2,
  maxAttempts: 3,
  workerId: 'worker-1',
  result: null,
  error: 'deliberate failure on attempt 1',
  createdAtMillis: 1_700_000_000_000,
  updatedAtMillis: 1_700_000_000_500,
  priority: 'HIGH',
};
const DONE_JOB: JobSnapshot = {
  ...JOB,
  jobId: 'job-2',
  state: 'COMPLETED',
  workerId: null,
  result: 'ba7816bf',
  error: null,
  priority: 'LOW',
  startedAtMillis: 1_700_000_000_100,
  finishedAtMillis: 1_700_000_000_200,
  resultFormat: 'text',
  timeoutMillis: 60_000,
  idempotencyKey: 'key-1',
};
const WORKER: WorkerSnapshot = {
  workerId: 'worker-1',
  capacity: 4,
  activeTasks: 1,
  lastHeartbeatMillis: 1_700_000_000_100,
  taskTypes: ['SHA256', 'resize'],
  draining: false,
  runningJobs: ['job-1'],
  queuedTasks: 0,
};
const ATTEMPT: AttemptSnapshot = {
  attemptNumber: 1,
  attemptId: '6f1c2b1e-8a0e-4d8e-9a77-3b1f0c9b2f10',
  workerId: 'worker-1',
  startedAtMillis: 1_700_000_000_000,
  finishedAtMillis: 1_700_000_000_050,
  outcome: 'SUCCEEDED',
  error: null,
};

/** One fully populated example of every message; the type makes it exhaustive. */
const SAMPLES: { [K in MessageType]: MessageOf<K> } = {
  WORKER_REGISTER: {
    type: 'WORKER_REGISTER',
    workerId: 'worker-1',
    capacity: 4,
    taskTypes: ['SLEEP', 'SHA256'],
    authToken: 'secret',
    heartbeatAck: true,
    prefetch: 8,
    heldAttempts: [{ jobId: 'job-1', attemptId: 'attempt-1' }],
    queues: ['emails', 'reports'],
    parents: true,
    slots: 5000,
    moreHeld: true,
    batches: true,
  },
  HELD_ATTEMPTS: {
    type: 'HELD_ATTEMPTS',
    workerId: 'worker-1',
    heldAttempts: [{ jobId: 'job-2', attemptId: 'attempt-2' }],
    more: false,
  },
  WORKER_REGISTERED: {
    type: 'WORKER_REGISTERED',
    workerId: 'worker-1',
    features: ['drain', 'heartbeatAck'],
  },
  HEARTBEAT: { type: 'HEARTBEAT', workerId: 'worker-1' },
  HEARTBEAT_ACK: { type: 'HEARTBEAT_ACK', workerId: 'worker-1' },
  TASK_ASSIGN: {
    type: 'TASK_ASSIGN',
    jobId: 'job-1',
    attemptId: '6f1c2b1e-8a0e-4d8e-9a77-3b1f0c9b2f10',
    attemptNumber: 1,
    taskType: 'SLEEP',
    payload: { durationMillis: 10, nested: { list: [1, 'two', null, true] } },
    timeoutMillis: 60_000,
    maxAttempts: 3,
    parents: [
      {
        jobId: 'job-0',
        taskType: 'WORD_COUNT',
        state: 'COMPLETED',
        result: '{"words":2}',
        resultFormat: 'json',
        omitted: false,
      },
    ],
  },
  TASK_ASSIGNS: {
    type: 'TASK_ASSIGNS',
    attempts: [
      {
        type: 'TASK_ASSIGN',
        jobId: 'job-1',
        attemptId: '6f1c2b1e-8a0e-4d8e-9a77-3b1f0c9b2f10',
        attemptNumber: 1,
        taskType: 'SLEEP',
        payload: { durationMillis: 10 },
        timeoutMillis: 60_000,
      },
      {
        type: 'TASK_ASSIGN',
        jobId: 'job-2',
        attemptId: '7f1c2b1e-8a0e-4d8e-9a77-3b1f0c9b2f10',
        attemptNumber: 2,
        taskType: 'SHA256',
        payload: { text: 'x' },
      },
    ],
  },
  TASK_CANCEL: {
    type: 'TASK_CANCEL',
    jobId: 'job-1',
    attemptId: '6f1c2b1e-8a0e-4d8e-9a77-3b1f0c9b2f10',
  },
  TASK_RESULT: {
    type: 'TASK_RESULT',
    workerId: 'worker-1',
    jobId: 'job-1',
    attemptId: '6f1c2b1e-8a0e-4d8e-9a77-3b1f0c9b2f10',
    success: true,
    result: 'slept 10 ms',
    error: null,
    retryable: false,
    resultFormat: 'json',
    requeue: true,
  },
  TASK_RESULTS: {
    type: 'TASK_RESULTS',
    workerId: 'worker-1',
    results: [
      {
        type: 'TASK_RESULT',
        workerId: 'worker-1',
        jobId: 'job-1',
        attemptId: '6f1c2b1e-8a0e-4d8e-9a77-3b1f0c9b2f10',
        success: true,
        result: 'slept 10 ms',
        error: null,
      },
      {
        type: 'TASK_RESULT',
        workerId: 'worker-1',
        jobId: 'job-2',
        attemptId: '7f1c2b1e-8a0e-4d8e-9a77-3b1f0c9b2f10',
        success: false,
        result: null,
        error: 'boom',
        retryable: false,
      },
    ],
  },
  WORKER_DRAINING: { type: 'WORKER_DRAINING', workerId: 'worker-1' },
  ERROR: {
    type: 'ERROR',
    message: 'NOT_LEADER: the leader is elsewhere',
    code: 'NOT_LEADER',
    leader: 'host-2:7071',
    index: 3,
    requestId: 7,
    shards: [
      {
        shard: 0,
        leader: 'host-2:7071',
        epoch: 4,
        clientAddress: 'host-2:7101',
        workerAddress: 'host-2:7100',
      },
      { shard: 1, leader: null, epoch: 0, clientAddress: null, workerAddress: null },
    ],
  },
  SUBMIT_JOBS: {
    type: 'SUBMIT_JOBS',
    jobs: [
      { taskType: 'SHA256', payload: { text: 'abc' } },
      { taskType: 'x', payload: {} },
    ],
  },
  JOBS_SUBMITTED: { type: 'JOBS_SUBMITTED', jobIds: ['job-1', 'job-2'] },
  SUBMIT_JOB: {
    type: 'SUBMIT_JOB',
    taskType: 'WORD_COUNT',
    payload: { text: 'one two ü 🎉' },
    maxAttempts: 3,
    idempotencyKey: 'key-1',
    priority: 'HIGH',
    timeoutMillis: 5_000,
    dependsOn: ['job-0'],
    onParentFailure: 'run',
    knownStates: ['SCHEDULED', 'WAITING'],
    queue: 'emails',
    groupKey: 'tenant-1',
  },
  JOB_SUBMITTED: {
    type: 'JOB_SUBMITTED',
    jobId: 'job-1',
    job: JOB,
    servingWorkers: 2,
    queuePaused: true,
  },
  SUBMIT_REJECTED: {
    type: 'SUBMIT_REJECTED',
    reason: 'too many active jobs',
    activeCount: 1000,
    limit: 1000,
    retryable: true,
  },
  GET_JOB_STATUS: {
    type: 'GET_JOB_STATUS',
    jobId: 'job-1',
    attempts: true,
    payload: true,
    knownStates: ['SCHEDULED', 'WAITING'],
  },
  JOB_STATUS: {
    type: 'JOB_STATUS',
    job: DONE_JOB,
    attempts: [ATTEMPT],
    payload: { text: 'abc', n: [1, 2] },
    payloadOmitted: false,
  },
  LIST_JOBS: {
    type: 'LIST_JOBS',
    limit: 50,
    state: 'QUEUED',
    cursor: 'c-1',
    taskType: 'SHA256',
    idempotencyKey: 'key-1',
    knownStates: ['SCHEDULED', 'WAITING'],
    queue: 'emails',
  },
  JOB_LIST: { type: 'JOB_LIST', jobs: [DONE_JOB, JOB], nextCursor: 'c-2' },
  LIST_WORKERS: { type: 'LIST_WORKERS' },
  WORKER_LIST: {
    type: 'WORKER_LIST',
    workers: [WORKER, { ...WORKER, workerId: 'worker-2' }],
    leader: 'host-1:7071',
    epoch: 7,
  },
  CANCEL_JOB: { type: 'CANCEL_JOB', jobId: 'job-1', knownStates: ['SCHEDULED'] },
  JOB_CANCEL: { type: 'JOB_CANCEL', cancelled: true, job: { ...DONE_JOB, state: 'CANCELLED' } },
  WAIT_JOB: { type: 'WAIT_JOB', jobId: 'job-1', timeoutMillis: 30_000, knownStates: ['WAITING'] },
  AUTH: { type: 'AUTH', token: 'secret' },
  AUTH_OK: { type: 'AUTH_OK' },
  PURGE_JOBS: { type: 'PURGE_JOBS', state: 'COMPLETED', olderThanMillis: 3_600_000 },
  JOBS_PURGED: { type: 'JOBS_PURGED', deleted: 12 },
  RERUN_JOBS: {
    type: 'RERUN_JOBS',
    queue: 'emails',
    state: 'FAILED',
    taskType: 'SEND',
    finishedSinceMillis: 1_700_000_000_000,
    limit: 500,
    maxAttempts: 3,
  },
  JOBS_RERUN: { type: 'JOBS_RERUN', rerun: 2, jobIds: ['a', 'b'], more: false },
  LIST_QUEUES: { type: 'LIST_QUEUES' },
  QUEUE_LIST: {
    type: 'QUEUE_LIST',
    queues: [
      {
        name: 'emails',
        paused: true,
        concurrency: 5,
        rateLimit: { max: 10, intervalMillis: 1_000 },
        groupConcurrency: null,
        groupRateLimit: { max: 2, intervalMillis: 60_000 },
        counts: { QUEUED: 3, COMPLETED: 7 },
        running: 1,
        groups: [{ groupKey: 'tenant-1', queued: 3, running: 1 }],
      },
    ],
  },
  SET_QUEUE: {
    type: 'SET_QUEUE',
    name: 'emails',
    paused: false,
    concurrency: 5,
    rateLimit: { max: 10, intervalMillis: 1_000 },
    groupConcurrency: 2,
    groupRateLimit: { max: 1, intervalMillis: 500 },
    clear: ['concurrency'],
    create: true,
  },
  QUEUE_INFO: {
    type: 'QUEUE_INFO',
    queue: {
      name: 'emails',
      paused: true,
      concurrency: 5,
      rateLimit: { max: 10, intervalMillis: 1_000 },
      groupConcurrency: null,
      groupRateLimit: { max: 2, intervalMillis: 60_000 },
      counts: { QUEUED: 3, COMPLETED: 7 },
      running: 1,
      groups: [{ groupKey: 'tenant-1', queued: 3, running: 1 }],
    },
    created: true,
  },
  SUBMIT_FLOW: {
    type: 'SUBMIT_FLOW',
    jobs: [
      {
        ref: 'a',
        taskType: 'SHA256',
        payload: { text: 'abc' },
        dependsOn: ['b', 'job-0'],
        maxAttempts: 2,
        priority: 'LOW',
        idempotencyKey: 'k',
        timeoutMillis: 1_000,
        onParentFailure: 'cancel',
      },
    ],
  },
  FLOW_SUBMITTED: { type: 'FLOW_SUBMITTED', jobs: [{ ref: 'a', jobId: 'job-1' }] },
  TASK_PROGRESS: {
    type: 'TASK_PROGRESS',
    workerId: 'worker-1',
    jobId: 'job-1',
    attemptId: 'a-1',
    fraction: 0.25,
    message: 'a quarter',
  },
  RECORD_STEP: {
    type: 'RECORD_STEP',
    workerId: 'worker-1',
    jobId: 'job-1',
    attemptId: 'a-1',
    requestId: 7,
    index: 0,
    name: 'fetch',
    result: '{"rows":3}',
  },
  STEP_RECORDED: { type: 'STEP_RECORDED', requestId: 7, jobId: 'job-1', index: 0 },
  GET_STEPS: {
    type: 'GET_STEPS',
    workerId: 'worker-1',
    jobId: 'job-1',
    attemptId: 'a-1',
    requestId: 8,
    fromIndex: 2,
  },
  STEPS: {
    type: 'STEPS',
    requestId: 8,
    jobId: 'job-1',
    steps: [{ name: 'fetch', result: '{"rows":3}', atMillis: 1_700_000_000_000 }],
    more: false,
  },
  TASK_SUSPEND: {
    type: 'TASK_SUSPEND',
    workerId: 'worker-1',
    jobId: 'job-1',
    attemptId: 'a-1',
    sleepMillis: 60_000,
    waitForJobId: 'job-2',
    waitForSignal: { name: 'approve', timeoutMillis: 60_000 },
    waitForEvent: { name: 'payment.settled', key: 'order-7' },
  },
  ENQUEUE_CHILD: {
    type: 'ENQUEUE_CHILD',
    workerId: 'worker-1',
    jobId: 'job-1',
    attemptId: 'a-1',
    requestId: 3,
    key: 'k:thumbnail',
    taskType: 'resize',
    payload: { width: 64 },
    maxAttempts: 2,
    priority: 'HIGH',
    timeoutMillis: 5_000,
    idempotencyKey: 'idem-1',
    queue: 'images',
    groupKey: 'tenant-1',
    runAtMillis: 1_700_000_000_000,
  },
  CHILD_ENQUEUED: { type: 'CHILD_ENQUEUED', requestId: 3, jobId: 'job-2', created: true },
  SUBSCRIBE_JOBS: {
    type: 'SUBSCRIBE_JOBS',
    filter: { jobId: 'job-1', taskType: 'SHA256', queue: 'default' },
    knownStates: ['SCHEDULED'],
  },
  SUBSCRIBED: { type: 'SUBSCRIBED' },
  JOB_EVENT: {
    type: 'JOB_EVENT',
    event: 'progress',
    atMillis: 1_700_000_000_200,
    job: { ...JOB, progress: { fraction: 0.5, message: null, atMillis: 1_700_000_000_200 } },
  },
  EVENTS_MISSED: { type: 'EVENTS_MISSED', missed: 3 },
  SET_SCHEDULE: {
    type: 'SET_SCHEDULE',
    schedule: {
      name: 'nightly',
      taskType: 'SHA256',
      cron: '0 2 * * *',
      everyMillis: null,
      timezone: 'Europe/Berlin',
      payload: { text: 'abc' },
      maxAttempts: 2,
      priority: 'HIGH',
      timeoutMillis: 1_000,
      overlap: 'skip',
      catchUp: 'none',
      paused: true,
    },
  },
  LIST_SCHEDULES: { type: 'LIST_SCHEDULES' },
  GET_SCHEDULE: { type: 'GET_SCHEDULE', name: 'nightly', knownStates: ['SCHEDULED'] },
  PAUSE_SCHEDULE: { type: 'PAUSE_SCHEDULE', name: 'nightly' },
  RESUME_SCHEDULE: { type: 'RESUME_SCHEDULE', name: 'nightly' },
  DELETE_SCHEDULE: { type: 'DELETE_SCHEDULE', name: 'nightly' },
  TRIGGER_SCHEDULE: { type: 'TRIGGER_SCHEDULE', name: 'nightly', knownStates: ['SCHEDULED'] },
  SCHEDULE_INFO: {
    type: 'SCHEDULE_INFO',
    schedule: {
      name: 'nightly',
      taskType: 'SHA256',
      cron: '0 2 * * *',
      everyMillis: null,
      timezone: 'Europe/Berlin',
      payload: { text: 'abc' },
      paused: false,
      overlap: 'allow',
      catchUp: 'latest',
      nextRunAtMillis: 1_700_000_000_000,
      lastRunAtMillis: null,
      lastJobId: null,
      maxAttempts: null,
      priority: null,
      timeoutMillis: null,
    },
    recentJobs: [{ jobId: 'j1', state: 'SCHEDULED', runAtMillis: 1_700_000_000_000 }],
  },
  SCHEDULE_LIST: {
    type: 'SCHEDULE_LIST',
    schedules: [
      {
        name: 'nightly',
        taskType: 'SHA256',
        cron: '0 2 * * *',
        everyMillis: null,
        timezone: 'Europe/Berlin',
        payload: { text: 'abc' },
        paused: false,
        overlap: 'allow',
        catchUp: 'latest',
        nextRunAtMillis: 1_700_000_000_000,
        lastRunAtMillis: null,
        lastJobId: null,
        maxAttempts: null,
        priority: null,
        timeoutMillis: null,
      },
    ],
  },
  SCHEDULE_DELETED: { type: 'SCHEDULE_DELETED', name: 'nightly' },
  SIGNAL_JOB: { type: 'SIGNAL_JOB', jobId: 'job-1', name: 'approve', payload: { by: 'ana' } },
  JOB_SIGNALLED: {
    type: 'JOB_SIGNALLED',
    jobId: 'job-1',
    name: 'approve',
    resumed: true,
    signalsHeld: 0,
  },
  PUBLISH_EVENT: {
    type: 'PUBLISH_EVENT',
    name: 'payment.settled',
    payload: [1, 'two'],
    key: 'order-7',
    eventId: 'evt-1',
  },
  EVENT_PUBLISHED: {
    type: 'EVENT_PUBLISHED',
    eventId: 'evt-1',
    jobIds: ['job-2'],
    resumed: 3,
    duplicate: true,
  },
  SET_TRIGGER: {
    type: 'SET_TRIGGER',
    trigger: {
      name: 'on-signup',
      event: 'user.signup',
      taskType: 'welcome.send',
      queue: 'emails',
      priority: 'HIGH',
      maxAttempts: 5,
    },
  },
  LIST_TRIGGERS: { type: 'LIST_TRIGGERS' },
  LIST_SHARDS: { type: 'LIST_SHARDS', authToken: 't0ken' },
  SHARD_LIST: {
    type: 'SHARD_LIST',
    shards: [
      {
        shard: 0,
        leader: '10.0.0.1:7071',
        epoch: 3,
        clientAddress: '10.0.0.1:40001',
        workerAddress: '10.0.0.1:40000',
      },
      { shard: 1, leader: null, epoch: 0, clientAddress: null, workerAddress: null },
    ],
    coordinators: [{ address: '10.0.0.1:7071', workerAddress: '10.0.0.1:7070', shards: 1 }],
  },
  DELETE_TRIGGER: { type: 'DELETE_TRIGGER', name: 'on-signup' },
  TRIGGER_INFO: {
    type: 'TRIGGER_INFO',
    trigger: {
      name: 'on-signup',
      event: 'user.signup',
      taskType: 'welcome.send',
      queue: 'emails',
      priority: null,
      maxAttempts: 5,
      createdAtMillis: 1_700_000_000_000,
      updatedAtMillis: 1_700_000_000_000,
    },
  },
  TRIGGER_LIST: {
    type: 'TRIGGER_LIST',
    triggers: [
      {
        name: 'on-signup',
        event: 'user.signup',
        taskType: 'welcome.send',
        queue: 'emails',
        priority: null,
        maxAttempts: 5,
        createdAtMillis: 1_700_000_000_000,
        updatedAtMillis: 1_700_000_000_000,
      },
    ],
  },
  TRIGGER_DELETED: { type: 'TRIGGER_DELETED', name: 'on-signup', deleted: true },
};

/**
 * The wire field names of the protocol (docs/PROTOCOL.md), written out independently of the codec.
 * Extensions: WORKER_REGISTER.taskTypes, WORKER_DRAINING, ERROR.code,
 * JOB_SUBMITTED.job, LIST_JOBS limit/state/cursor, JOB_LIST.nextCursor, WAIT_JOB.
 */
const WIRE_FIELDS: { [K in MessageType]: readonly string[] } = {
  WORKER_REGISTER: [
    'workerId',
    'capacity',
    'taskTypes',
    'authToken',
    'heartbeatAck',
    'prefetch',
    'heldAttempts',
    'queues',
    'parents',
    'slots',
    'moreHeld',
    'batches',
  ],
  HELD_ATTEMPTS: ['workerId', 'heldAttempts', 'more'],
  WORKER_REGISTERED: ['workerId', 'features'],
  HEARTBEAT: ['workerId'],
  HEARTBEAT_ACK: ['workerId'],
  TASK_ASSIGN: [
    'jobId',
    'attemptId',
    'attemptNumber',
    'taskType',
    'payload',
    'timeoutMillis',
    'maxAttempts',
    'parents',
  ],
  TASK_ASSIGNS: ['attempts'],
  TASK_CANCEL: ['jobId', 'attemptId'],
  TASK_RESULTS: ['workerId', 'results'],
  TASK_RESULT: [
    'workerId',
    'jobId',
    'attemptId',
    'success',
    'result',
    'error',
    'retryable',
    'resultFormat',
    'requeue',
  ],
  WORKER_DRAINING: ['workerId'],
  ERROR: ['message', 'code', 'leader', 'index', 'requestId', 'shards'],
  SUBMIT_JOBS: ['jobs'],
  JOBS_SUBMITTED: ['jobIds'],
  SUBMIT_JOB: [
    'taskType',
    'payload',
    'maxAttempts',
    'idempotencyKey',
    'priority',
    'timeoutMillis',
    'knownStates',
    'queue',
    'groupKey',
    'dependsOn',
    'onParentFailure',
  ],
  JOB_SUBMITTED: ['jobId', 'job', 'servingWorkers', 'queuePaused'],
  SUBMIT_REJECTED: ['reason', 'activeCount', 'limit', 'retryable'],
  GET_JOB_STATUS: ['jobId', 'attempts', 'payload', 'knownStates'],
  JOB_STATUS: ['job', 'attempts', 'payload', 'payloadOmitted'],
  LIST_JOBS: ['limit', 'state', 'cursor', 'taskType', 'idempotencyKey', 'knownStates', 'queue'],
  JOB_LIST: ['jobs', 'nextCursor'],
  LIST_WORKERS: [],
  WORKER_LIST: ['workers', 'leader', 'epoch'],
  CANCEL_JOB: ['jobId', 'knownStates'],
  JOB_CANCEL: ['cancelled', 'job'],
  WAIT_JOB: ['jobId', 'timeoutMillis', 'knownStates'],
  AUTH: ['token'],
  AUTH_OK: [],
  PURGE_JOBS: ['state', 'olderThanMillis'],
  JOBS_PURGED: ['deleted'],
  RERUN_JOBS: ['queue', 'state', 'taskType', 'finishedSinceMillis', 'limit', 'maxAttempts'],
  JOBS_RERUN: ['rerun', 'jobIds', 'more'],
  LIST_QUEUES: [],
  QUEUE_LIST: ['queues'],
  SET_QUEUE: [
    'name',
    'paused',
    'concurrency',
    'rateLimit',
    'groupConcurrency',
    'groupRateLimit',
    'clear',
    'create',
  ],
  QUEUE_INFO: ['queue', 'created'],
  SUBMIT_FLOW: ['jobs'],
  FLOW_SUBMITTED: ['jobs'],
  TASK_PROGRESS: ['workerId', 'jobId', 'attemptId', 'fraction', 'message'],
  RECORD_STEP: ['workerId', 'jobId', 'attemptId', 'requestId', 'index', 'name', 'result'],
  STEP_RECORDED: ['requestId', 'jobId', 'index'],
  GET_STEPS: ['workerId', 'jobId', 'attemptId', 'requestId', 'fromIndex'],
  STEPS: ['requestId', 'jobId', 'steps', 'more'],
  TASK_SUSPEND: [
    'workerId',
    'jobId',
    'attemptId',
    'sleepMillis',
    'waitForJobId',
    'waitForSignal',
    'waitForEvent',
  ],
  ENQUEUE_CHILD: [
    'workerId',
    'jobId',
    'attemptId',
    'requestId',
    'key',
    'taskType',
    'payload',
    'maxAttempts',
    'priority',
    'timeoutMillis',
    'idempotencyKey',
    'queue',
    'groupKey',
    'runAtMillis',
  ],
  CHILD_ENQUEUED: ['requestId', 'jobId', 'created'],
  SUBSCRIBE_JOBS: ['filter', 'knownStates'],
  SUBSCRIBED: [],
  JOB_EVENT: ['event', 'atMillis', 'job'],
  EVENTS_MISSED: ['missed'],
  SET_SCHEDULE: ['schedule'],
  LIST_SCHEDULES: [],
  GET_SCHEDULE: ['name', 'knownStates'],
  PAUSE_SCHEDULE: ['name'],
  RESUME_SCHEDULE: ['name'],
  DELETE_SCHEDULE: ['name'],
  TRIGGER_SCHEDULE: ['name', 'knownStates'],
  SCHEDULE_INFO: ['schedule', 'recentJobs'],
  SCHEDULE_LIST: ['schedules'],
  SCHEDULE_DELETED: ['name'],
  SIGNAL_JOB: ['jobId', 'name', 'payload'],
  JOB_SIGNALLED: ['jobId', 'name', 'resumed', 'signalsHeld'],
  PUBLISH_EVENT: ['name', 'payload', 'key', 'eventId'],
  EVENT_PUBLISHED: ['eventId', 'jobIds', 'resumed', 'duplicate'],
  SET_TRIGGER: ['trigger'],
  LIST_TRIGGERS: [],
  LIST_SHARDS: ['authToken'],
  SHARD_LIST: ['shards', 'coordinators'],
  DELETE_TRIGGER: ['name'],
  TRIGGER_INFO: ['trigger'],
  TRIGGER_LIST: ['triggers'],
  TRIGGER_DELETED: ['name', 'deleted'],
};
const JOB_FIELDS = [
  'jobId',
  'taskType',
  'state',
  'attempts',
  'maxAttempts',
  'workerId',
  'result',
  'error',
  'createdAtMillis',
  'updatedAtMillis',
  'priority',
];
const WORKER_FIELDS = [
  'workerId',
  'capacity',
  'activeTasks',
  'lastHeartbeatMillis',
  'taskTypes',
  'draining',
  'runningJobs',
  'queuedTasks',
];

/** Every optional v1 field of each type, as a reference peer may send it: `null`. */
const OPTIONAL_FIELDS: Partial<Record<MessageType, readonly string[]>> = {
  WORKER_REGISTER: ['taskTypes'],
  TASK_RESULT: ['result', 'error'],
  ERROR: ['code'],
  SUBMIT_JOB: ['maxAttempts', 'idempotencyKey', 'priority'],
  JOB_SUBMITTED: ['job'],
  LIST_JOBS: ['limit', 'state', 'cursor'],
  JOB_LIST: ['nextCursor'],
  WAIT_JOB: ['timeoutMillis'],
};

/** Extension fields (beyond version 1): absent after decoding when null, and never emitted as null. */
const EXTENSION_FIELDS: Partial<Record<MessageType, readonly string[]>> = {
  WORKER_REGISTER: [
    'authToken',
    'heartbeatAck',
    'prefetch',
    'heldAttempts',
    'slots',
    'moreHeld',
    'batches',
  ],
  WORKER_REGISTERED: ['features'],
  TASK_ASSIGN: ['timeoutMillis', 'maxAttempts'],
  TASK_RESULT: ['retryable', 'resultFormat', 'requeue'],
  ERROR: ['leader', 'shards'],
  SUBMIT_JOB: ['timeoutMillis'],
  JOB_SUBMITTED: ['servingWorkers'],
  LIST_JOBS: ['taskType', 'idempotencyKey'],
  GET_JOB_STATUS: ['attempts', 'payload'],
  JOB_STATUS: ['attempts', 'payload', 'payloadOmitted'],
  WORKER_LIST: ['leader', 'epoch'],
};

const ALL_TYPES = Object.keys(SAMPLES) as MessageType[];
const ALL_FIELD_NAMES = [...new Set([...Object.values(WIRE_FIELDS).flat(), ...JOB_FIELDS])];

function sample(type: MessageType): Message {
  return SAMPLES[type];
}

/** encodeMessage -> FrameDecoder (one byte at a time when asked) -> decodeMessage. */
function overTheWire(msg: Message, byteByByte = false): Message {
  const frame = encodeMessage(msg);
  const decoder = new FrameDecoder();
  const payloads: Buffer[] = [];
  if (byteByByte) {
    for (let i = 0; i < frame.length; i++) payloads.push(...decoder.push(frame.subarray(i, i + 1)));
  } else {
    payloads.push(...decoder.push(frame));
  }
  assert.equal(payloads.length, 1);
  assert.equal(decoder.end(), 'clean');
  return decodeMessage(payloads[0] as Buffer);
}

function decodeText(text: string): Message {
  return decodeMessage(Buffer.from(text, 'utf8'));
}

function wireObject(msg: Message): Record<string, unknown> {
  return JSON.parse(messageToJson(msg)) as Record<string, unknown>;
}

function sortedKeys(value: unknown): string[] {
  assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value));
  return Object.keys(value).sort();
}

/** Asserts `fn` throws a ProtocolError with `code` whose message contains `mention`. */
function assertProtocolError(fn: () => unknown, code: ProtocolErrorCode, mention?: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ProtocolError, `expected a ProtocolError, got ${String(err)}`);
    assert.equal(err.code, code, err.message);
    if (mention !== undefined) assert.ok(err.message.includes(mention), err.message);
    return true;
  });
}

describe('codec round trip', () => {
  for (const type of ALL_TYPES) {
    it(`returns an equal ${type} when it goes through encode, frames and decode`, () => {
      assert.deepEqual(overTheWire(sample(type)), sample(type));
      assert.deepEqual(overTheWire(sample(type), true), sample(type));
    });
  }

  for (const [type, fields] of Object.entries(OPTIONAL_FIELDS)) {
    it(`round-trips ${type} when every optional field is null`, () => {
      const msg = { ...sample(type as MessageType) } as Record<string, unknown>;
      for (const f of fields) msg[f] = null;
      assert.deepEqual(overTheWire(msg as unknown as Message), msg);
    });
  }

  for (const [type, fields] of Object.entries(EXTENSION_FIELDS)) {
    it(`leaves out the extension fields of ${type} when they are null, on the wire and decoded`, () => {
      const msg = { ...sample(type as MessageType) } as Record<string, unknown>;
      for (const f of fields) msg[f] = null;
      const wire = wireObject(msg as unknown as Message);
      for (const f of fields) assert.equal(f in wire, false, `${f} must not be emitted as null`);
      const expected = { ...msg };
      for (const f of fields) delete expected[f];
      assert.deepEqual(overTheWire(msg as unknown as Message), expected);
    });
  }

  it('round-trips snapshots with every nullable field null and every enum value', () => {
    const states = ['QUEUED', 'RUNNING', 'RETRY_WAIT', 'COMPLETED', 'FAILED', 'CANCELLED'] as const;
    const priorities = ['HIGH', 'NORMAL', 'LOW'] as const;
    const jobs = states.map((state, i) => ({
      ...JOB,
      jobId: `job-${i}`,
      state,
      priority: priorities[i % 3] ?? 'NORMAL',
      workerId: null,
      result: null,
      error: null,
    }));
    const msg: Message = { type: 'JOB_LIST', jobs, nextCursor: null };
    assert.deepEqual(overTheWire(msg), msg);
    assert.deepEqual(overTheWire({ type: 'JOB_LIST', jobs: [], nextCursor: null }), {
      type: 'JOB_LIST',
      jobs: [],
      nextCursor: null,
    });
  });

  it('decodes a snapshot on its own with jobSnapshotCodec when given plain JSON', () => {
    const raw = JSON.parse(JSON.stringify({ ...JOB, extra: 1 })) as unknown;
    assert.deepEqual(jobSnapshotCodec.decode(raw, 'job'), JOB);
    assertProtocolError(
      () => jobSnapshotCodec.decode({ ...JOB, attempts: '2' }, 'job'),
      ProtocolErrorCode.BadField,
      'job.attempts',
    );
  });
});

describe('codec wire fields', () => {
  for (const type of ALL_TYPES) {
    it(`emits exactly the protocol fields of ${type} when the input carries extra properties`, () => {
      const polluted = {
        ...sample(type),
        extra: 'x',
        v: 9,
        __internal: { a: 1 },
      } as unknown as Message;
      const wire = wireObject(polluted);
      assert.deepEqual(Object.keys(wire)[0], 'type', 'type comes first');
      assert.equal(wire.type, type);
      assert.deepEqual(sortedKeys(wire), ['type', ...WIRE_FIELDS[type]].sort());
    });
  }

  it('emits exactly the snapshot fields when nested snapshots carry extra properties', () => {
    const job = { ...JOB, leaseExpiresAtMillis: 5, payload: { secret: 1 } };
    const worker = { ...WORKER, socket: 'internal', sessionId: 7 };
    const status = wireObject({ type: 'JOB_STATUS', job });
    assert.deepEqual(sortedKeys(status.job), [...JOB_FIELDS].sort());
    const list = wireObject({ type: 'JOB_LIST', jobs: [job, job], nextCursor: null });
    for (const entry of list.jobs as unknown[])
      assert.deepEqual(sortedKeys(entry), [...JOB_FIELDS].sort());
    const workers = wireObject({ type: 'WORKER_LIST', workers: [worker] });
    for (const entry of workers.workers as unknown[]) {
      assert.deepEqual(sortedKeys(entry), [...WORKER_FIELDS].sort());
    }
    const cancel = wireObject({ type: 'JOB_CANCEL', cancelled: false, job });
    assert.deepEqual(sortedKeys(cancel.job), [...JOB_FIELDS].sort());
    const submitted = wireObject({ type: 'JOB_SUBMITTED', jobId: 'job-1', job });
    assert.deepEqual(sortedKeys(submitted.job), [...JOB_FIELDS].sort());
  });

  it('keeps a task payload as it is when it has fields of its own', () => {
    const payload = { text: 'abc', extra: { deep: [1, { x: null }] } };
    const wire = wireObject({ ...SAMPLES.SUBMIT_JOB, payload });
    assert.deepEqual(wire.payload, payload);
  });

  it('writes explicit nulls for optional fields that are null', () => {
    const wire = wireObject({ ...SAMPLES.TASK_RESULT, result: null, error: null });
    assert.equal(wire.result, null);
    assert.equal(wire.error, null);
  });
});

describe('decodeMessage envelope', () => {
  it('ignores and drops unknown fields when decoding', () => {
    const msg = decodeText('{"type":"HEARTBEAT","workerId":"w","load":0.5,"tags":["a"],"x":{}}');
    assert.deepEqual(msg, { type: 'HEARTBEAT', workerId: 'w' });
    const nested = decodeText(JSON.stringify({ type: 'JOB_STATUS', job: { ...JOB, owner: 'x' } }));
    assert.deepEqual(nested, { type: 'JOB_STATUS', job: JOB });
  });

  it('treats explicit nulls for optional fields like absent ones', () => {
    const cases: [string, string][] = [
      [
        '{"type":"SUBMIT_JOB","taskType":"SLEEP","payload":{"durationMillis":1},"maxAttempts":null,"idempotencyKey":null,"priority":null}',
        '{"type":"SUBMIT_JOB","taskType":"SLEEP","payload":{"durationMillis":1}}',
      ],
      [
        '{"type":"TASK_RESULT","workerId":"w","jobId":"j","attemptId":"a","success":false,"result":null,"error":null}',
        '{"type":"TASK_RESULT","workerId":"w","jobId":"j","attemptId":"a","success":false}',
      ],
      [
        '{"type":"WORKER_REGISTER","workerId":"w","capacity":2,"taskTypes":null}',
        '{"type":"WORKER_REGISTER","workerId":"w","capacity":2}',
      ],
      ['{"type":"LIST_JOBS","limit":null,"state":null,"cursor":null}', '{"type":"LIST_JOBS"}'],
      ['{"type":"ERROR","message":"m","code":null}', '{"type":"ERROR","message":"m"}'],
      ['{"type":"WAIT_JOB","jobId":"j","timeoutMillis":null}', '{"type":"WAIT_JOB","jobId":"j"}'],
      ['{"type":"JOB_SUBMITTED","jobId":"j","job":null}', '{"type":"JOB_SUBMITTED","jobId":"j"}'],
      ['{"type":"JOB_LIST","jobs":[],"nextCursor":null}', '{"type":"JOB_LIST","jobs":[]}'],
    ];
    for (const [withNulls, absent] of cases) {
      const msg = decodeText(withNulls);
      assert.deepEqual(msg, decodeText(absent));
      const values = msg as unknown as Record<string, unknown>;
      for (const field of OPTIONAL_FIELDS[msg.type] ?? []) {
        assert.equal(values[field], null, `${msg.type}.${field}`);
      }
    }
  });

  it('accepts a snapshot whose nullable fields are null or absent', () => {
    const { workerId: _w, result: _r, ...rest } = JOB;
    const msg = decodeText(JSON.stringify({ type: 'JOB_STATUS', job: { ...rest, error: null } }));
    assert.deepEqual(msg, {
      type: 'JOB_STATUS',
      job: { ...JOB, workerId: null, result: null, error: null },
    });
  });

  it('accepts "v":1 and a null or absent version', () => {
    const expected = { type: 'HEARTBEAT', workerId: 'w' };
    assert.deepEqual(decodeText('{"type":"HEARTBEAT","workerId":"w","v":1}'), expected);
    assert.deepEqual(decodeText('{"v":null,"type":"HEARTBEAT","workerId":"w"}'), expected);
    assert.deepEqual(decodeText('{"type":"HEARTBEAT","workerId":"w"}'), expected);
  });

  it('rejects any other version with PROTOCOL_BAD_VALUE', () => {
    for (const v of ['2', '0', '"1"', '1.5', 'true', '[1]']) {
      assertProtocolError(
        () => decodeText(`{"type":"HEARTBEAT","workerId":"w","v":${v}}`),
        ProtocolErrorCode.BadValue,
        'version',
      );
    }
  });

  it('rejects with PROTOCOL_UNKNOWN_TYPE when the type is not a protocol message', () => {
    for (const type of ['NOPE', 'heartbeat', '', 'toString', '__proto__', 'constructor']) {
      assertProtocolError(
        () => decodeText(JSON.stringify({ type, workerId: 'w' })),
        ProtocolErrorCode.UnknownType,
      );
    }
  });

  it('rejects with PROTOCOL_MALFORMED_JSON when the payload is not JSON', () => {
    for (const text of ['not json', '{"type":"HEARTBEAT"', '{type:"HEARTBEAT"}', ' ', "{'a':1}"]) {
      assertProtocolError(() => decodeText(text), ProtocolErrorCode.MalformedJson);
    }
  });

  it('rejects with PROTOCOL_MALFORMED_JSON when the payload is not valid UTF-8', () => {
    const head = Buffer.from('{"type":"HEARTBEAT","workerId":"', 'utf8');
    const tail = Buffer.from('"}', 'utf8');
    for (const bad of [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xf8, 0x88, 0x80]]) {
      const payload = Buffer.concat([head, Buffer.from(bad), tail]);
      assertProtocolError(() => decodeMessage(payload), ProtocolErrorCode.MalformedJson);
    }
  });

  it('rejects with PROTOCOL_MALFORMED_JSON when a UTF-8 byte order mark precedes the JSON', () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    const json = Buffer.from('{"type":"HEARTBEAT","workerId":"w"}', 'utf8');
    assertProtocolError(
      () => decodeMessage(Buffer.concat([bom, json])),
      ProtocolErrorCode.MalformedJson,
    );
    // A BOM character inside a string value is just a character.
    const inside = Buffer.from('{"type":"HEARTBEAT","workerId":"\ufeffw"}', 'utf8');
    assert.deepEqual(decodeMessage(inside), { type: 'HEARTBEAT', workerId: '\ufeffw' });
  });

  it('rejects with PROTOCOL_NOT_AN_OBJECT when the JSON is not an object with a string type', () => {
    const texts = [
      '[]',
      '[{"type":"HEARTBEAT","workerId":"w"}]',
      '"HEARTBEAT"',
      '42',
      'null',
      'true',
      '{}',
      '{"workerId":"w"}',
      '{"type":7,"workerId":"w"}',
      '{"type":null}',
      '{"type":["HEARTBEAT"]}',
      '{"type":{"name":"HEARTBEAT"}}',
    ];
    for (const text of texts)
      assertProtocolError(() => decodeText(text), ProtocolErrorCode.NotAnObject);
  });

  it('rejects with PROTOCOL_BAD_FIELD naming the field when a field has the wrong JSON type', () => {
    const cases: [object, string][] = [
      [{ type: 'GET_JOB_STATUS', jobId: 42 }, 'jobId'],
      [{ type: 'GET_JOB_STATUS' }, 'jobId'],
      [{ type: 'GET_JOB_STATUS', jobId: null }, 'jobId'],
      [{ type: 'WORKER_REGISTER', workerId: 'w', capacity: '4' }, 'capacity'],
      [{ type: 'WORKER_REGISTER', workerId: 'w', capacity: 1.5 }, 'capacity'],
      [{ type: 'WORKER_REGISTER', workerId: 'w', capacity: 1e300 }, 'capacity'],
      [{ type: 'WORKER_REGISTER', workerId: 'w', capacity: 2, taskTypes: 'SLEEP' }, 'taskTypes'],
      [
        { type: 'WORKER_REGISTER', workerId: 'w', capacity: 2, taskTypes: ['A', 1] },
        'taskTypes[1]',
      ],
      [{ ...SAMPLES.TASK_RESULT, success: 'true' }, 'success'],
      [{ ...SAMPLES.TASK_RESULT, result: 5 }, 'result'],
      [{ ...SAMPLES.TASK_ASSIGN, payload: [1, 2] }, 'payload'],
      [{ ...SAMPLES.TASK_ASSIGN, payload: 'x' }, 'payload'],
      [{ ...SAMPLES.TASK_ASSIGN, attemptNumber: '1' }, 'attemptNumber'],
      [{ ...SAMPLES.SUBMIT_JOB, payload: null }, 'payload'],
      [{ ...SAMPLES.SUBMIT_JOB, maxAttempts: '3' }, 'maxAttempts'],
      [{ ...SAMPLES.SUBMIT_JOB, priority: 1 }, 'priority'],
      [{ ...SAMPLES.SUBMIT_REJECTED, retryable: 0 }, 'retryable'],
      [{ ...SAMPLES.LIST_JOBS, limit: '10' }, 'limit'],
      [{ type: 'JOB_STATUS', job: { ...JOB, attempts: 'two' } }, 'job.attempts'],
      [{ type: 'JOB_STATUS', job: [JOB] }, 'job'],
      [
        { type: 'JOB_LIST', jobs: [JOB, { ...JOB, createdAtMillis: null }] },
        'jobs[1].createdAtMillis',
      ],
      [{ type: 'JOB_LIST', jobs: {} }, 'jobs'],
      [{ type: 'WORKER_LIST', workers: [{ ...WORKER, capacity: true }] }, 'workers[0].capacity'],
      [{ type: 'ERROR', message: { text: 'x' } }, 'message'],
      [{ type: 'WAIT_JOB', jobId: 'j', timeoutMillis: 'soon' }, 'timeoutMillis'],
      [
        { type: 'QUEUE_INFO', queue: { ...SAMPLES.QUEUE_INFO.queue, counts: { QUEUED: 'x' } } },
        'queue.counts.QUEUED',
      ],
      [
        {
          type: 'QUEUE_INFO',
          queue: { ...SAMPLES.QUEUE_INFO.queue, groups: [{ groupKey: null, queued: 1 }] },
        },
        'queue.groups[0].running',
      ],
      [{ type: 'SUBMIT_FLOW', jobs: [{ ref: 'a', taskType: 7, payload: {} }] }, 'jobs[0].taskType'],
    ];
    for (const [raw, field] of cases) {
      assertProtocolError(
        () => decodeText(JSON.stringify(raw)),
        ProtocolErrorCode.BadField,
        `field ${field} `,
      );
    }
  });

  it('rejects with PROTOCOL_BAD_VALUE naming the field when an enum value is unknown', () => {
    const cases: [object, string][] = [
      [{ ...SAMPLES.SUBMIT_JOB, priority: 'URGENT' }, 'priority'],
      [{ ...SAMPLES.SUBMIT_JOB, priority: 'high' }, 'priority'],
      [{ type: 'LIST_JOBS', state: 'DONE' }, 'state'],
      [{ type: 'JOB_STATUS', job: { ...JOB, state: 'DONE' } }, 'job.state'],
      [{ type: 'JOB_STATUS', job: { ...JOB, priority: 'MEDIUM' } }, 'job.priority'],
      [{ type: 'JOB_LIST', jobs: [JOB, { ...JOB, state: 'running' }] }, 'jobs[1].state'],
    ];
    for (const [raw, field] of cases) {
      assertProtocolError(
        () => decodeText(JSON.stringify(raw)),
        ProtocolErrorCode.BadValue,
        `field ${field} `,
      );
    }
  });

  it('decodes JSON with insignificant whitespace and escapes', () => {
    const text = ' \n{ "type" : "HEARTBEAT" ,\t"workerId" : "w\\u00fc\\n" }\r\n';
    assert.deepEqual(decodeText(text), { type: 'HEARTBEAT', workerId: 'wü\n' });
  });
});

/** A SUBMIT_JOB whose payload is `{"a":[[...]]}`: the payload object plus `arrays` levels. */
function deepSubmitText(arrays: number): string {
  const nested = '['.repeat(arrays) + ']'.repeat(arrays);
  return `{"type":"SUBMIT_JOB","taskType":"SLEEP","payload":{"a":${nested}}}`;
}

describe('codec payload nesting', () => {
  it('accepts and re-encodes a payload when it nests 1000 levels deep', () => {
    const msg = decodeText(deepSubmitText(999));
    assert.equal(msg.type, 'SUBMIT_JOB');
    assert.equal(decodeMessage(encodeMessage(msg).subarray(4)).type, 'SUBMIT_JOB');
  });

  it('rejects with PROTOCOL_BAD_VALUE naming the field when a payload nests deeper', () => {
    assertProtocolError(
      () => decodeText(deepSubmitText(1000)),
      ProtocolErrorCode.BadValue,
      'payload',
    );
    // JSON.parse copes with this depth; JSON.stringify would overflow the stack.
    const text = deepSubmitText(100_000);
    assertProtocolError(() => decodeText(text), ProtocolErrorCode.BadValue, 'payload');
    const assign = text.replace(
      '"SUBMIT_JOB"',
      '"TASK_ASSIGN","jobId":"j","attemptId":"a","attemptNumber":1',
    );
    assertProtocolError(() => decodeText(assign), ProtocolErrorCode.BadValue, 'payload');
  });

  it('rejects a deep payload when the depth comes from objects rather than arrays', () => {
    const text = `{"type":"SUBMIT_JOB","taskType":"T","payload":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`;
    assertProtocolError(() => decodeText(text), ProtocolErrorCode.BadValue, 'payload');
  });
});

/** Any JSON value, and objects shaped like messages with random field values. */
const envelopeArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue(),
  fc
    .tuple(
      fc.constantFrom(...ALL_TYPES, 'NOPE'),
      fc.dictionary(fc.constantFrom(...ALL_FIELD_NAMES, 'v'), fc.jsonValue({ maxDepth: 2 })),
    )
    .map(([type, fields]) => ({ ...fields, type })),
  // Valid samples with one field replaced by a random value.
  fc
    .tuple(
      fc.constantFrom(...ALL_TYPES),
      fc.constantFrom(...ALL_FIELD_NAMES),
      fc.jsonValue({ maxDepth: 2 }),
    )
    .map(([type, field, value]) => ({ ...sample(type), [field]: value })),
);

describe('decodeValue properties', () => {
  it('throws nothing but ProtocolError when fed random JSON values', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        try {
          decodeValue(value);
        } catch (err) {
          assert.ok(err instanceof ProtocolError, `unexpected ${String(err)}`);
        }
      }),
      { seed: SEED_RANDOM_JSON, numRuns: 500 },
    );
  });

  it('decodes or throws ProtocolError, and re-encodes stably, when fed message-shaped values', () => {
    let decoded = 0;
    fc.assert(
      fc.property(envelopeArb, (value) => {
        let msg: Message;
        try {
          msg = decodeValue(value);
        } catch (err) {
          assert.ok(err instanceof ProtocolError, `unexpected ${String(err)}`);
          return;
        }
        decoded++;
        const json = messageToJson(msg);
        assert.equal(messageToJson(overTheWire(msg)), json);
      }),
      { seed: SEED_RANDOM_ENVELOPE, numRuns: 1000 },
    );
    assert.ok(decoded > 50, `only ${decoded} random values decoded`);
  });
});

describe('the codec where code cannot be made from strings', () => {
  it('encodes and decodes every sample as it does here, and refuses the same input', () => {
    // The walks are made with new Function; under this flag they are loops instead.
    const codecUrl = new URL('../../src/protocol/codec.js', import.meta.url).href;
    const script = `
      const codec = await import(${JSON.stringify(codecUrl)});
      let generation = 'allowed';
      try { new Function('return 1'); } catch { generation = 'refused'; }
      const samples = JSON.parse(process.argv[1]);
      const texts = samples.map((m) => codec.messageToJson(codec.decodeValue(m)));
      let refusal = null;
      try { codec.decodeValue({ type: 'JOB_LIST', jobs: [{ jobId: 1 }], nextCursor: null }); }
      catch (err) { refusal = err.message; }
      process.stdout.write(JSON.stringify({ generation, texts, refusal }));
    `;
    const samples = Object.values(SAMPLES);
    const child = spawnSync(
      process.execPath,
      [
        '--disallow-code-generation-from-strings',
        '--input-type=module',
        '-e',
        script,
        JSON.stringify(samples),
      ],
      { encoding: 'utf8' },
    );
    assert.equal(child.status, 0, child.stderr);
    const out = JSON.parse(child.stdout) as {
      generation: string;
      texts: string[];
      refusal: string | null;
    };
    assert.equal(out.generation, 'refused');
    assert.deepEqual(
      out.texts,
      samples.map((m) => messageToJson(decodeValue(m))),
    );
    assert.throws(
      () => decodeValue({ type: 'JOB_LIST', jobs: [{ jobId: 1 }], nextCursor: null }),
      (err: unknown) => err instanceof ProtocolError && err.message === out.refusal,
    );
  });
});
