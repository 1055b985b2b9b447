/** Public surface of the API client: one retry layer, rate limits, parsed answers. */
export { ServiceClient, parseBalance, readBalance } from './service.js';
export type { BalanceAnswer, CallOptions, ServiceClientOptions, SharedUploadSlot, SubmitRequest, UploadOptions } from './service.js';
export { checkPolicy, DEFAULT_POLICY, decide, delay, sleep, withRetry, UNUSABLE_TRIES } from './retry.js';
export { ANSWER_MAX_BYTES, DEFAULT_REQUEST_TIMEOUT_MS, DEFAULT_STOP_GRACE_MS, MAX_DEPTH, nestingWithin } from './limits.js';
export type { RetryDecision, RetryInfo, RetryMethod, RetryOptions, RetryPolicy } from './retry.js';
export { TokenBucket, UploadLimiter, type LimiterWait } from './limiters.js';
export { retryAfterMs, redact } from './http.js';
export { holdsKey, redactDeep } from './redact.js';
export {
  MusicFileSchema,
  MusicTaskSchema,
  ResultFileSchema,
  SubmitResultSchema,
  TaskSchema,
  TaskStatusSchema,
  UploadRecordSchema,
} from './schemas.js';
export type { MusicFile, MusicTask, ResultFile, SubmitResult, Task, TaskStatus, UploadRecord } from './schemas.js';
export { serviceConfigFromEnv } from './config.js';
export { ChatClient, parseSse, wireRequest, MESSAGES_DEFAULT_MAX_TOKENS } from './chat.js';
export type { ChatAnswer, ChatClientOptions, ChatMessage, ChatRequest, ChatUsage, SseEvent } from './chat.js';
export type { ServiceConfig } from './config.js';
