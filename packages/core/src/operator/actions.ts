import { pageSize } from "../operation/checks.js"
import { compareCodePoints } from "../operation/retention.js"
import { type Check, fieldsOf, LIST, oneOf, optional, type Rule, Rules } from "../validation.js"
import type { Millis } from "../watch/ProjectionWatch.js"
import { decodeTagged, encodeCursorParts } from "./cursors.js"

/** How a person's action ended, as the store answered it: on every row, on none, on some, or not at all. */
export type OperatorActionOutcome = "done" | "refused" | "partial" | "failed"

/** Every `OperatorActionOutcome`. */
export const OPERATOR_ACTION_OUTCOMES: ReadonlyArray<OperatorActionOutcome> = ["done", "refused", "partial", "failed"]

/** The most rows one audit entry names. */
export const MAX_ACTION_TARGETS = 1000

/** What a person did, for the audit log: who, what, to which rows, and what the store answered. */
export interface OperatorActionInput {
  /** Who acted, as the operator page knows them (a user name, an email, `cli`). */
  readonly actor: string
  /** What they did: the store call (`retryOperation`, `pauseProvider`, …). */
  readonly action: string
  /** The rows it named, each as its formatted identity (`formatOperationKey`, `formatWatchIdentity`, …); at most `MAX_ACTION_TARGETS`. */
  readonly targets: ReadonlyArray<string>
  /** How it ended. */
  readonly outcome: OperatorActionOutcome
  /** The store's answer in words (each row's result or refusal). */
  readonly answer: string
}

/** One entry of the audit log: the action, when the store recorded it, and its id. */
export interface OperatorAction extends OperatorActionInput {
  /** A random id the store gave the entry. */
  readonly actionID: string
  /** When the store recorded it (ms since the epoch, the store's clock). */
  readonly at: Millis
}

/** The filter of `listOperatorActions`: each field present narrows; newest first. */
export interface OperatorActionFilter {
  /** Only entries of this actor. */
  readonly actor?: string | undefined
  /** Only entries of this action. */
  readonly action?: string | undefined
  /** Page size: default 50, at most 500. */
  readonly limit?: number | undefined
  /** The previous page's `nextCursor`. */
  readonly cursor?: string | undefined
}

/** Where an audit page starts: strictly older than this entry. */
export interface OperatorActionPosition {
  /** When the entry was recorded. */
  readonly at: Millis
  /** The entry's id (ties on `at` are ordered by it). */
  readonly actionID: string
}

/** An audit page request as the repository sees it (cursor decoded). */
export interface OperatorActionQuery {
  /** Only entries of this actor. */
  readonly actor?: string | undefined
  /** Only entries of this action. */
  readonly action?: string | undefined
  /** The page size: at most this many entries. */
  readonly limit: number
  /** Only entries strictly older than this position. */
  readonly after?: OperatorActionPosition | undefined
}

const targetsRule: Rule = (value) =>
  Rules.ids(value) ?? ((value as ReadonlyArray<string>).length > MAX_ACTION_TARGETS ? `must name at most ${MAX_ACTION_TARGETS} rows` : undefined)

/** The fields and checks of an `OperatorActionInput`. */
export const OPERATOR_ACTION = fieldsOf<OperatorActionInput>("entry", {
  actor: Rules.id,
  action: Rules.id,
  targets: targetsRule,
  outcome: oneOf(...OPERATOR_ACTION_OUTCOMES),
  answer: Rules.text
}, { nested: { targets: LIST } })

/** The fields and checks of an `OperatorActionFilter`. */
export const OPERATOR_ACTION_FILTER = fieldsOf<OperatorActionFilter>("filter", {
  actor: optional(Rules.id),
  action: optional(Rules.id),
  limit: optional(pageSize),
  cursor: optional(Rules.id)
}, { record: optional(Rules.record) })

/** The checks of a filter given as `undefined` or an object. */
export const operatorActionFilterChecks = (filter: unknown): Array<Check> => OPERATOR_ACTION_FILTER.checks(filter)

/** The audit order: newest first, then by id, descending. */
export const compareOperatorActions = (a: OperatorActionPosition, b: OperatorActionPosition): number =>
  b.at - a.at || compareCodePoints(b.actionID, a.actionID)

/** The opaque cursor after an entry. */
export const encodeOperatorActionCursor = (entry: OperatorActionPosition): string => encodeCursorParts(["a", entry.at, entry.actionID])

/** The position an audit cursor names, or `undefined` when it is not one this store made. */
export const decodeOperatorActionCursor = (cursor: string): OperatorActionPosition | undefined => {
  const [at, actionID] = decodeTagged(cursor, "a", 3) ?? []
  return typeof at === "number" && Number.isSafeInteger(at) && typeof actionID === "string" ? { at, actionID } : undefined
}

/** The reference answer to an `OperatorActionQuery` over every entry. */
export const operatorActionPage = (rows: ReadonlyArray<OperatorAction>, query: OperatorActionQuery): ReadonlyArray<OperatorAction> =>
  rows
    .filter((row) =>
      (query.actor === undefined || row.actor === query.actor) &&
      (query.action === undefined || row.action === query.action) &&
      (query.after === undefined || compareOperatorActions(row, query.after) > 0)
    )
    .sort(compareOperatorActions)
    .slice(0, query.limit)
