import { identityOf, NOW } from "./fixtures.js"

/** One refused call: the method, its arguments, and the error it must fail with. */
export interface BadCall {
  readonly method: string
  readonly args: ReadonlyArray<unknown>
  readonly error: { readonly _tag: string; readonly field?: string }
  /** Only the Effect API checks it (the Promise API builds its own readers object). */
  readonly effectOnly?: boolean
}

const id = identityOf()
const invalid = (field: string) => ({ _tag: "InvalidInput", field })

/** Identities that are not one, with the field each must be refused for. */
const badIdentities: ReadonlyArray<readonly [unknown, string]> = [
  [undefined, "identity"],
  [null, "identity"],
  ["did:owner:1", "identity"],
  [[], "identity"],
  [{ ...id, ownerDID: "" }, "identity.ownerDID"],
  [{ ...id, connectorName: "" }, "identity.connectorName"],
  [{ ...id, model: undefined }, "identity.model"],
  [{ ...id, accountKey: 7 }, "identity.accountKey"],
  [{ ...id, sourceID: "" }, "identity.sourceID"]
]

/** Times that are not finite, non-negative whole milliseconds. */
const badTimes: ReadonlyArray<unknown> = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -1, 1.5, "1"]
/** Limits and attempt counts that are not positive integers. */
const badCounts: ReadonlyArray<unknown> = [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "5"]
/** Generations that are not non-negative integers. */
const badGenerations: ReadonlyArray<unknown> = [-1, 1.5, Number.NaN, "1", undefined]
/** Arguments that are not an object at all. */
const notObjects: ReadonlyArray<unknown> = [undefined, null, 5, "options"]

const claim = { until: NOW + 10, generation: 1, now: NOW }
const defer = { generation: 1, claimedUntil: NOW + 10, nextAttemptAt: NOW + 20 }
const verification = { generation: 1, fetchedDigest: "w", maxAttempts: 3, dueAt: NOW }
const resumeAuth = { ownerDID: "did:owner:1", connectorNames: ["gcal"], now: NOW }

/** Every way the public API can be called wrongly that the boundary must refuse. */
export const badCalls: ReadonlyArray<BadCall> = [
  ...badIdentities.flatMap(([identity, field]): ReadonlyArray<BadCall> => [
    { method: "getWatch", args: [identity], error: invalid(field) },
    { method: "armWatch", args: [identity, "manual", { dueAt: NOW }], error: invalid(field) },
    { method: "claimWatchAttempt", args: [identity, claim], error: invalid(field) },
    { method: "deferWatch", args: [identity, defer], error: invalid(field) },
    { method: "recordVerification", args: [identity, verification], error: invalid(field) }
  ]),

  ...["", undefined, null, 5].map((documentID): BadCall => ({
    method: "getWatchByDocument",
    args: [documentID],
    error: invalid("documentID")
  })),
  ...[undefined, null, "doc-1", ["doc-1", ""], [5], { length: 1 }].map((documentIDs): BadCall => ({
    method: "listWatchesByDocuments",
    args: [documentIDs],
    error: invalid("documentIDs")
  })),

  { method: "armWatch", args: [id, "finalize", { dueAt: NOW }], error: { _tag: "ReservedArmReason" } },
  { method: "armWatch", args: [undefined, "finalize", undefined], error: { _tag: "ReservedArmReason" } },
  ...["bogus", "", "MANUAL", undefined, null].map((reason): BadCall => ({
    method: "armWatch",
    args: [id, reason, { dueAt: NOW }],
    error: invalid("reason")
  })),
  ...notObjects.map((options): BadCall => ({ method: "armWatch", args: [id, "manual", options], error: invalid("options") })),
  ...[...badTimes, undefined, null].map((dueAt): BadCall => ({
    method: "armWatch",
    args: [id, "ingress", { dueAt, triggeringWinner: "w" }],
    error: invalid("options.dueAt")
  })),
  ...[5, {}, true].map((triggeringWinner): BadCall => ({
    method: "armWatch",
    args: [id, "ingress", { dueAt: NOW, triggeringWinner }],
    error: invalid("options.triggeringWinner")
  })),

  ...notObjects.map((options): BadCall => ({ method: "claimWatchAttempt", args: [id, options], error: invalid("options") })),
  ...badTimes.map((until): BadCall => ({ method: "claimWatchAttempt", args: [id, { ...claim, until }], error: invalid("options.until") })),
  ...badGenerations.map((generation): BadCall => ({
    method: "claimWatchAttempt",
    args: [id, { ...claim, generation }],
    error: invalid("options.generation")
  })),
  ...[...badTimes, undefined].map((now): BadCall => ({ method: "claimWatchAttempt", args: [id, { ...claim, now }], error: invalid("options.now") })),

  ...notObjects.map((options): BadCall => ({ method: "deferWatch", args: [id, options], error: invalid("options") })),
  ...badTimes.map((nextAttemptAt): BadCall => ({
    method: "deferWatch",
    args: [id, { ...defer, nextAttemptAt }],
    error: invalid("options.nextAttemptAt")
  })),
  ...["sleepy", "", "OFFLINE", 1].map((reason): BadCall => ({
    method: "deferWatch",
    args: [id, { ...defer, reason }],
    error: invalid("options.reason")
  })),
  ...badGenerations.map((generation): BadCall => ({
    method: "deferWatch",
    args: [id, { ...defer, generation }],
    error: invalid("options.generation")
  })),
  ...[...badTimes, undefined, null].map((claimedUntil): BadCall => ({
    method: "deferWatch",
    args: [id, { ...defer, claimedUntil }],
    error: invalid("options.claimedUntil")
  })),

  ...notObjects.map((input): BadCall => ({ method: "recordVerification", args: [id, input], error: invalid("input") })),
  ...badGenerations.map((generation): BadCall => ({
    method: "recordVerification",
    args: [id, { ...verification, generation }],
    error: invalid("input.generation")
  })),
  ...badTimes.map((claimedUntil): BadCall => ({
    method: "recordVerification",
    args: [id, { ...verification, claimedUntil }],
    error: invalid("input.claimedUntil")
  })),
  ...[5, undefined, {}].map((fetchedDigest): BadCall => ({
    method: "recordVerification",
    args: [id, { ...verification, fetchedDigest }],
    error: invalid("input.fetchedDigest")
  })),
  ...[...badCounts, undefined].map((maxAttempts): BadCall => ({
    method: "recordVerification",
    args: [id, { ...verification, maxAttempts }],
    error: invalid("input.maxAttempts")
  })),
  ...badTimes.map((dueAt): BadCall => ({
    method: "recordVerification",
    args: [id, { ...verification, dueAt }],
    error: invalid("input.dueAt")
  })),

  ...[...badTimes, undefined].map((now): BadCall => ({ method: "resumeOfflineDeferred", args: [now], error: invalid("now") })),
  ...notObjects.map((params): BadCall => ({ method: "resumeAuthDeferred", args: [params], error: invalid("params") })),
  ...["", undefined, 5].map((ownerDID): BadCall => ({
    method: "resumeAuthDeferred",
    args: [{ ...resumeAuth, ownerDID }],
    error: invalid("params.ownerDID")
  })),
  ...["gcal", [""], [5], undefined, null].map((connectorNames): BadCall => ({
    method: "resumeAuthDeferred",
    args: [{ ...resumeAuth, connectorNames }],
    error: invalid("params.connectorNames")
  })),
  ...[...badTimes, undefined].map((now): BadCall => ({
    method: "resumeAuthDeferred",
    args: [{ ...resumeAuth, now }],
    error: invalid("params.now")
  })),

  ...[...badTimes, undefined].map((now): BadCall => ({ method: "listDueOperations", args: [now, {}], error: invalid("now") })),
  ...[5, "readers", null].map((readers): BadCall => ({
    method: "listDueOperations",
    args: [NOW, readers],
    error: invalid("readers"),
    effectOnly: true
  })),

  ...notObjects.map((params): BadCall => ({ method: "listDueWork", args: [params], error: invalid("params") })),
  ...[...badTimes, undefined].map((now): BadCall => ({ method: "listDueWork", args: [{ now, limit: 10 }], error: invalid("params.now") })),
  ...[...badCounts, undefined, 10_001].map((limit): BadCall => ({
    method: "listDueWork",
    args: [{ now: NOW, limit }],
    error: invalid("params.limit")
  })),
  ...[null, 5, "", "not-a-cursor", "a\u0000b"].map((cursor): BadCall => ({
    method: "listDueWork",
    args: [{ now: NOW, limit: 10, cursor }],
    error: invalid("params.cursor")
  })),
  ...[5, "readers", null].map((readers): BadCall => ({
    method: "listDueWork",
    args: [{ now: NOW, limit: 10, readers }],
    error: invalid("params.readers")
  })),
  { method: "listDueWork", args: [{ now: NOW, limit: 10, after: "x" }], error: invalid("params.after") },

  ...notObjects.map((params): BadCall => ({ method: "collectFinishedOperations", args: [params], error: invalid("params") })),
  ...[Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, "1", undefined, null].map((before): BadCall => ({
    method: "collectFinishedOperations",
    args: [{ before, limit: 10 }],
    error: invalid("params.before")
  })),
  ...[...badCounts, undefined].map((limit): BadCall => ({
    method: "collectFinishedOperations",
    args: [{ before: NOW, limit }],
    error: invalid("params.limit")
  }))
]

/** The methods the bad calls cover, in order. */
export const badCallMethods: ReadonlyArray<string> = Array.from(new Set(badCalls.map((call) => call.method)))

/** A readable label of a bad call's arguments (NaN and undefined stay visible). */
export const describeArgs = (args: ReadonlyArray<unknown>): string =>
  args.map((arg) =>
    arg === undefined ? "undefined" : typeof arg === "number" && !Number.isFinite(arg) ? String(arg) : JSON.stringify(arg)
  ).join(", ")
