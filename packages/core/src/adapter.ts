/**
 * What an adapter builds a store with besides the main entry's ports: the row lanes (`DirectDatabase`,
 * `LaneDatabase`, `TurnQueue`), the lost-race loop, instrumentation, `makePromiseStore` and the open-option checks.
 *
 * @module @connector-store/core/adapter
 */
export * from "./ports/DirectDatabase.js"
export * from "./ports/TurnQueue.js"
export * from "./ports/WorkSignal.js"
export { relistRunPage } from "./ports/OperatorRepository.js"
export { reportCorruptRows } from "./ports/CorruptRows.js"
export { countLostRaceNow, LostRace, MAX_CAS_ATTEMPTS, requireWon, retryOnLostRace } from "./service/run.js"
export * from "./service/instrument.js"
export * from "./service/bound.js"
export * from "./service/tracing.js"
export { storeSeries } from "./service/metrics.js"
export { clockReadingNow } from "./clock.js"
export { decodeJsonColumn, encodeJsonColumn } from "./syncstate/json.js"
export {
  type Check,
  fieldOf,
  firstProblem,
  identityChecks,
  oneOf,
  optional,
  type Rule,
  Rules,
  utf8Length,
  validate,
  validateRecord
} from "./validation.js"
export {
  allOptionNames,
  COMMON_OPEN_OPTIONS,
  commonOpenChecks,
  nearestName,
  openOptionsProblem,
  unknownKeyOf,
  winnerReadersProblem
} from "./promise/openOptions.js"
export { digestOf, fromPromiseReaders, isThenable, toMap } from "./promise/readers.js"
export type { PromiseCall } from "./promise/call.js"
export { makePromiseStore, type PromiseStoreParts } from "./promise/facade.js"
