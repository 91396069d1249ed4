import fc from "fast-check"
import { Redacted } from "effect"
import { NOW } from "./fixtures.js"

// Every public entry point of the store as a template of one valid call,
// each argument a tree whose leaves name their rule. A generated bad call
// replaces one node (a leaf or a whole object) with a value that breaks its
// rule, so the expected refusal names that node's path. The limits are
// stated here on their own: ids ≤ 512 bytes of UTF-8, text ≤ 1 MiB.

/** What a leaf must be; `optional` leaves may also be absent. */
export type Kind =
  | "id"
  | "idOrNull"
  | "text"
  | "textOrNull"
  | "millis"
  | "millisOrNull"
  | "finite"
  | "positiveInt"
  | "positiveIntOrNull"
  | "httpStatusOrNull"
  | "nonNegativeInt"
  | "fraction"
  | "flag"
  | "digestOrNull"
  | "ids"
  | "receipts"
  | "verifier"
  | "function"
  | { readonly oneOf: ReadonlyArray<string>; readonly orNull?: true }

/** A node of an argument: a rule-checked leaf, a record of nodes, or a constant never replaced. */
export type Node =
  | { readonly leaf: Kind; readonly value: unknown; readonly optional?: true }
  | { readonly record: Readonly<Record<string, Node>>; readonly optional?: true }
  | { readonly constant: unknown }

/** One entry point: its name, and its parameters by the names its errors use. */
export interface EntryPoint {
  readonly method: string
  readonly params: ReadonlyArray<readonly [string, Node]>
  /** Left out of the Promise API runs (its Promise signature differs). */
  readonly effectOnly?: true
}

const leaf = (kind: Kind, value: unknown): Node => ({ leaf: kind, value })
const opt = (kind: Kind, value: unknown): Node => ({ leaf: kind, value, optional: true })
const rec = (record: Record<string, Node>): Node => ({ record })
const optRec = (record: Record<string, Node>): Node => ({ record, optional: true })

const id = (value: string) => leaf("id", value)
const identity = rec({ ownerDID: id("did:owner:1"), connectorName: id("gcal"), model: id("Event"), accountKey: id("acct-1"), sourceID: id("src-1") })
const scope = rec({ ownerDID: id("did:owner:1"), connectorName: id("gcal"), model: id("Event"), accountKey: id("acct-1") })
const key = rec({ callerDID: id("did:caller:1"), operationID: id("op-1") })
const page = rec({ limit: leaf("positiveInt", 10), after: opt("id", "a") })
const ref = rec({ runID: id("run-1"), sourceID: id("src-1") })
const lease = rec({ connectorName: id("gcal"), ownerDID: id("did:owner:1"), token: id("token-1") })
const terms = rec({ now: leaf("millis", NOW), leaseMs: leaf("positiveInt", 1_000) })

/** Every entry point of `ConnectorStore` (and, unless `effectOnly`, of the Promise facade). */
export const ENTRY_POINTS: ReadonlyArray<EntryPoint> = [
  { method: "getWatch", params: [["identity", identity]] },
  { method: "getWatchByDocument", params: [["documentID", id("doc-1")]] },
  { method: "listWatchesByDocuments", params: [["documentIDs", leaf("ids", ["doc-1"])]] },
  {
    method: "armWatch",
    params: [["identity", identity], ["reason", leaf({ oneOf: ["ingress", "manual"] }, "ingress")], [
      "options",
      rec({ dueAt: leaf("millis", NOW), triggeringWinner: opt("digestOrNull", "w") })
    ]]
  },
  {
    method: "claimWatchAttempt",
    params: [["identity", identity], ["options", rec({ until: leaf("millis", NOW + 10), generation: leaf("nonNegativeInt", 1), now: leaf("millis", NOW) })]]
  },
  {
    method: "deferWatch",
    params: [["identity", identity], [
      "options",
      rec({
        generation: leaf("nonNegativeInt", 1),
        claimedUntil: leaf("millis", NOW + 10),
        nextAttemptAt: leaf("millis", NOW + 20),
        reason: opt({ oneOf: ["offline", "auth"], orNull: true }, "offline")
      })
    ]]
  },
  {
    method: "recordVerification",
    params: [["identity", identity], [
      "input",
      rec({
        generation: leaf("nonNegativeInt", 1),
        fetchedDigest: leaf("digestOrNull", "w"),
        maxAttempts: leaf("positiveInt", 3),
        dueAt: leaf("millis", NOW),
        claimedUntil: opt("millisOrNull", NOW)
      })
    ]]
  },
  { method: "resumeOfflineDeferred", params: [["now", leaf("millis", NOW)]] },
  {
    method: "resumeAuthDeferred",
    params: [["params", rec({ ownerDID: id("did:owner:1"), connectorNames: leaf("ids", ["gcal"]), now: leaf("millis", NOW) })]]
  },
  { method: "listDueOperations", params: [["now", leaf("millis", NOW)], ["readers", { constant: {} }]], effectOnly: true },
  {
    method: "listDueWork",
    params: [["params", rec({ now: leaf("millis", NOW), limit: leaf("positiveInt", 10), cursor: opt("text", "c"), readers: { constant: {} } })]]
  },
  { method: "collectFinishedOperations", params: [["params", rec({ before: leaf("finite", NOW), limit: leaf("positiveInt", 10) })]] },
  { method: "awaitWork", params: [["params", rec({ since: leaf("nonNegativeInt", 0), timeoutMs: leaf("positiveInt", 10) })]] },

  { method: "getSyncState", params: [["connectorName", id("gcal")], ["ownerDID", id("did:owner:1")]] },
  {
    method: "setSyncState",
    params: [["connectorName", id("gcal")], ["ownerDID", id("did:owner:1")], [
      "state",
      rec({
        status: leaf({ oneOf: ["idle", "syncing", "error"] }, "idle"),
        lastSyncedAt: leaf("text", "2025-01-01"),
        entityCount: leaf("nonNegativeInt", 1),
        error: opt("textOrNull", null)
      })
    ], ["options", optRec({ leaseToken: opt("id", "token-1") })]]
  },
  {
    method: "updateSyncProgress",
    params: [["connectorName", id("gcal")], ["ownerDID", id("did:owner:1")], [
      "recompute",
      leaf("function", () => ({ checkpoint: null, recovery: null }))
    ], ["options", optRec({ maxRetries: opt("nonNegativeInt", 1), leaseToken: opt("id", "token-1") })]],
    effectOnly: true
  },
  { method: "deleteSyncState", params: [["connectorName", id("gcal")], ["ownerDID", id("did:owner:1")]] },
  { method: "listSyncStatesForConnector", params: [["connectorName", id("gcal")]] },
  { method: "claimSyncLease", params: [["connectorName", id("gcal")], ["ownerDID", id("did:owner:1")], ["options", terms]] },
  { method: "renewSyncLease", params: [["lease", lease], ["options", terms]] },
  { method: "releaseSyncLease", params: [["lease", lease]] },

  {
    method: "createPendingAuth",
    params: [[
      "record",
      rec({
        state: id("state-new"),
        provider: id("gcal"),
        ownerDID: id("did:owner:1"),
        codeVerifier: leaf("verifier", Redacted.make("v".repeat(43))),
        redirectURL: id("https://app/cb"),
        scopes: leaf("ids", ["calendar"]),
        createdAt: opt("millis", NOW),
        expiresAt: leaf("millis", NOW + 60_000)
      })
    ]]
  },
  { method: "consumePendingAuth", params: [["state", id("state-1")], ["options", optRec({ now: opt("millis", NOW) })]] },
  { method: "deleteExpiredPendingAuth", params: [["cutoff", leaf("millis", NOW)]] },

  { method: "startRelistRun", params: [["scope", scope]] },
  { method: "getSweepCheckpoint", params: [["scope", scope]] },
  { method: "getRelistRun", params: [["runID", id("run-1")]] },
  { method: "recordRelistReceipt", params: [["runID", id("run-1")], ["receipts", leaf("receipts", [{ sourceID: "a", digest: "d" }])]] },
  {
    method: "commitSweepCheckpoint",
    params: [["runID", id("run-1")], [
      "checkpoint",
      rec({ page: leaf("positiveInt", 1), cursor: leaf("textOrNull", null), receipts: leaf("receipts", []), complete: opt("flag", true) })
    ]]
  },
  { method: "abandonRelistRun", params: [["runID", id("run-1")]] },
  { method: "listSweepReceipts", params: [["runID", id("run-1")], ["page", page]] },
  { method: "collectRelistRuns", params: [["params", rec({ before: leaf("finite", NOW), limit: leaf("positiveInt", 10) })]] },
  {
    method: "listSweepCandidates",
    params: [["runID", id("run-1")], [
      "options",
      rec({
        limit: leaf("positiveInt", 10),
        after: opt("id", "a"),
        kind: opt({ oneOf: ["deleted", "diverged"] }, "deleted"),
        maxDeletionFraction: opt("fraction", 0.5),
        acceptDeletionsBeyondLimit: opt("flag", false)
      })
    ]]
  },
  { method: "recordSweepOutcome", params: [["ref", ref], ["outcome", leaf({ oneOf: ["delete_local", "reingest", "keep"] }, "keep")]] },
  { method: "markSweepCandidateApplied", params: [["ref", ref]] },
  { method: "applySweepCandidate", params: [["ref", ref], ["apply", leaf("function", () => undefined)]] },
  { method: "recordSweepApplyFailure", params: [["ref", ref], ["failure", rec({ kind: id("network"), message: leaf("text", "down") })]] },
  { method: "rearmSweepCandidate", params: [["identity", identity]] },
  { method: "getSweepCandidate", params: [["identity", identity]] },
  { method: "listGivenUpSweepCandidates", params: [["scope", scope], ["page", page]] },

  {
    method: "claimDueWatches",
    params: [["params", rec({ now: leaf("millis", NOW), until: leaf("millis", NOW + 1_000), limit: leaf("positiveInt", 10) })]]
  },
  { method: "claimDueOperations", params: [["params", rec({ limit: leaf("positiveInt", 10), leaseMs: opt("positiveInt", 1_000) })]] },
  {
    method: "claimOperation",
    params: [[
      "input",
      rec({
        callerDID: id("did:caller:9"),
        operationID: id("op-new"),
        ownerDID: id("did:owner:1"),
        connectorName: id("gcal"),
        model: id("Event"),
        accountKey: id("acct-1"),
        target: id("calendar/primary"),
        deterministicEventID: id("event-9"),
        payloadHash: id("hash-9"),
        op: leaf({ oneOf: ["create", "update", "delete"] }, "update"),
        sourceID: opt("idOrNull", "src-9"),
        documentID: opt("idOrNull", "doc-9"),
        providerEtag: opt("textOrNull", null),
        reissueIntent: { constant: { kind: "conditional-update", ifMatch: "etag-0" } },
        leaseMs: opt("positiveInt", 1_000)
      })
    ]]
  },
  { method: "renewOperationLease", params: [["key", key], ["options", rec({ leaseToken: id("lease-1"), leaseMs: opt("positiveInt", 1_000) })]] },
  { method: "markOperationSent", params: [["key", key], ["options", rec({ leaseToken: id("lease-1") })]] },
  {
    method: "recordAttemptFailure",
    params: [["key", key], [
      "options",
      rec({
        leaseToken: id("lease-1"),
        kind: leaf({ oneOf: ["retryable", "permanent", "unknown", "offline", "auth"] }, "retryable"),
        retryAt: opt("millis", NOW)
      })
    ]]
  },
  {
    method: "finalizeOperationAndArmWatch",
    params: [["key", key], [
      "options",
      rec({
        leaseToken: id("lease-1"),
        sourceID: id("src-1"),
        documentID: id("doc-1"),
        providerEtag: opt("textOrNull", null),
        resultEntity: { constant: null },
        watchDueAt: leaf("millis", NOW)
      })
    ]]
  },
  {
    method: "finalizeDeleteOperation",
    params: [["key", key], ["options", rec({ leaseToken: id("lease-1"), sourceID: id("src-1"), documentID: id("doc-1") })]]
  },
  { method: "getOperation", params: [["key", key]] },
  { method: "getOperationByNodeKey", params: [["nodeKey", id("node-1")], ["viewerDID", id("did:caller:1")]] },
  {
    method: "listTrackedOperations",
    params: [[
      "filter",
      rec({
        visibleTo: id("did:caller:1"),
        documentIDs: opt("ids", ["doc-1"]),
        connectorName: opt("id", "gcal"),
        limit: opt("positiveInt", 10),
        cursor: opt("id", "c")
      })
    ]]
  },
  { method: "getDocumentWriteStates", params: [["documentIDs", leaf("ids", ["doc-1"])]] },
  {
    method: "listOperations",
    params: [[
      "filter",
      optRec({
        ownerDID: opt("id", "did:owner:1"),
        connectorName: opt("id", "gcal"),
        callerDID: opt("id", "did:caller:1"),
        documentID: opt("id", "doc-1"),
        states: { constant: ["attempted"] },
        dueBy: opt("millis", NOW),
        inDoubt: opt("flag", true),
        limit: opt("positiveInt", 10),
        cursor: opt("id", "c")
      })
    ]]
  },
  {
    method: "listWatches",
    params: [[
      "filter",
      optRec({
        ownerDID: opt("id", "did:owner:1"),
        connectorName: opt("id", "gcal"),
        documentID: opt("id", "doc-1"),
        statuses: { constant: ["verified"] },
        dueBy: opt("millis", NOW),
        limit: opt("positiveInt", 10),
        cursor: opt("id", "c")
      })
    ]]
  },
  { method: "listRelistRuns", params: [["filter", optRec({ states: { constant: ["complete"] }, limit: opt("positiveInt", 10), cursor: opt("id", "c") })]] },
  { method: "findOperationByNodeKey", params: [["nodeKey", id("node-1")]] },
  {
    method: "settleOperation",
    params: [["key", key], [
      "input",
      rec({
        outcome: leaf({ oneOf: ["committed", "dead"] }, "committed"),
        sourceID: id("src-1"),
        documentID: id("doc-1"),
        providerEtag: opt("textOrNull", "etag-1"),
        watchDueAt: leaf("millis", NOW)
      })
    ]]
  },
  { method: "retryOperation", params: [["key", key]] },
  { method: "rearmWatch", params: [["identity", identity], ["options", rec({ dueAt: leaf("millis", NOW) })]] },
  {
    method: "listSyncStates",
    params: [[
      "filter",
      optRec({
        connectorName: opt("id", "gcal"),
        ownerDID: opt("id", "did:owner:1"),
        lease: opt({ oneOf: ["none", "held", "stale"] }, "stale"),
        limit: opt("positiveInt", 10),
        cursor: opt("id", "c")
      })
    ]]
  },
  {
    method: "setProviderLimit",
    params: [["limit", rec({ connectorName: id("gcal"), accountKey: opt("id", "acct-1"), maxInFlight: leaf("positiveIntOrNull", 2) })]]
  },
  {
    method: "pauseProvider",
    params: [["pause", rec({
      connectorName: id("gcal"),
      accountKey: opt("id", "acct-1"),
      until: leaf("millis", NOW + 60_000),
      status: opt("httpStatusOrNull", 429)
    })]]
  },
  { method: "resumeProvider", params: [["scope", rec({ connectorName: id("gcal"), accountKey: opt("id", "acct-1") })]] },
  { method: "getProviderLimit", params: [["scope", rec({ connectorName: id("gcal"), accountKey: opt("id", "acct-1") })]] },
  {
    method: "releaseSyncLeaseByOperator",
    params: [["connectorName", id("gcal")], ["ownerDID", id("did:owner:1")], ["options", optRec({ force: opt("flag", true) })]]
  },
  {
    method: "recordOperatorAction",
    params: [["entry", rec({
      actor: id("ada"),
      action: id("retryOperation"),
      targets: leaf("ids", ["did:caller:1/op-1"]),
      outcome: leaf({ oneOf: ["done", "refused", "partial", "failed"] }, "done"),
      answer: leaf("text", "retried")
    })]]
  },
  {
    method: "listOperatorActions",
    params: [["filter", optRec({ actor: opt("id", "ada"), action: opt("id", "retryOperation"), limit: opt("positiveInt", 10), cursor: opt("id", "c") })]]
  },
  {
    method: "enqueueOperation",
    params: [[
      "input",
      rec({
        callerDID: id("did:caller:9"),
        operationID: id("op-queued"),
        ownerDID: id("did:owner:1"),
        connectorName: id("gcal"),
        model: id("Event"),
        accountKey: id("acct-1"),
        target: id("calendar/primary"),
        deterministicEventID: id("event-9"),
        payloadHash: id("hash-9"),
        op: leaf({ oneOf: ["create", "update", "delete"] }, "update"),
        sourceID: opt("idOrNull", "src-9"),
        documentID: opt("idOrNull", "doc-9"),
        providerEtag: opt("textOrNull", null),
        reissueIntent: { constant: { kind: "conditional-update", ifMatch: "etag-0" } }
      })
    ]]
  },
  { method: "endFailoverDoubt", params: [["input", rec({ by: id("ops@example.com") })]] }
]

/** The entry points that take no input at all, so no call of theirs can be bad. */
export const NO_INPUT_METHODS: ReadonlyArray<string> = ["getStoreStatus", "listProviderLimits"]

const ID_BYTES = 512
const TEXT_BYTES = 1_048_576

/** Values of the wrong shape for anything: other types, and one level too deep. */
const wrongShapes = (valid: unknown): ReadonlyArray<unknown> => [{}, [], { value: valid }, [valid], Symbol.for("x")]
const badStrings = ["a\u0000b", "\u0000", "x\uD800", "\uDC00y"]

/** Values that break `kind` (absence too, unless the leaf is optional). */
const badValuesOf = (kind: Kind, valid: unknown, optional: boolean): ReadonlyArray<unknown> => {
  const absent = optional ? [] : [undefined]
  const notNull = [null, ...absent]
  if (typeof kind === "object") return [...(kind.orNull === true ? absent : notNull), "bogus", "", 5, String(valid).toUpperCase(), ...wrongShapes(valid)]
  switch (kind) {
    case "id":
      return [...notNull, "", 5, true, Number.NaN, "x".repeat(ID_BYTES + 1), "é".repeat(ID_BYTES / 2 + 1), ...badStrings, ...wrongShapes(valid)]
    case "text":
      return [...notNull, 5, true, "x".repeat(TEXT_BYTES + 1), ...badStrings, ...wrongShapes(valid)]
    case "idOrNull":
      return [...absent, "", 5, true, "x".repeat(ID_BYTES + 1), ...badStrings, ...wrongShapes(valid)]
    case "textOrNull":
    case "digestOrNull":
      return [...absent, 5, true, ...badStrings, ...wrongShapes(valid)]
    case "millis":
      return [...notNull, Number.NaN, Infinity, -Infinity, -1, 1.5, 2 ** 53, "1", true, ...wrongShapes(valid)]
    case "millisOrNull":
      return [...absent, Number.NaN, Infinity, -Infinity, -1, 1.5, 2 ** 53, "1", true, ...wrongShapes(valid)]
    case "finite":
      return [...notNull, Number.NaN, Infinity, -Infinity, "1", ...wrongShapes(valid)]
    case "positiveInt":
      return [...notNull, 0, -1, 1.5, Number.NaN, Infinity, "5", ...wrongShapes(valid)]
    case "positiveIntOrNull":
      return [...absent, 0, -1, 1.5, Number.NaN, Infinity, "5", 2 ** 31, ...wrongShapes(valid)]
    case "httpStatusOrNull":
      return [...absent, 0, 99, 600, 42.5, Number.NaN, "429", true, ...wrongShapes(valid)]
    case "nonNegativeInt":
      return [...notNull, -1, 0.5, Number.NaN, -Infinity, "1", ...wrongShapes(valid)]
    case "fraction":
      return [...notNull, -0.1, 1.5, Number.NaN, Infinity, "0.5", ...wrongShapes(valid)]
    case "flag":
      return [...notNull, "yes", 1, 0, ...wrongShapes(valid)]
    case "ids":
      return [...notNull, "doc-1", [""], ["a\u0000"], ["\uD800"], ["x".repeat(ID_BYTES + 1)], [5], [null], [["a"]], { length: 1 }, {}]
    case "receipts":
      return [...notNull, "a", { length: 1 }, [null], [{}], [{ sourceID: "", digest: null }], [{ sourceID: "a" }], [{
        sourceID: "a\u0000",
        digest: null
      }], [{ sourceID: "a", digest: 5 }], [{ sourceID: "a", digest: "d" }, { sourceID: 5, digest: "d" }]]
    case "verifier":
      // A plain string of the pattern is what the Promise API takes (it redacts it), so only short ones are wrong everywhere.
      return [...notNull, "short", Redacted.make("short"), Redacted.make("v".repeat(43) + "\u0000"), {}]
    case "function":
      return [...notNull, 5, "f", {}]
  }
}

/** A generated bad call: the arguments, and the path of the node that is wrong. */
export interface GeneratedBadCall {
  readonly args: ReadonlyArray<unknown>
  readonly path: string
  /** The wrong value, readable (NaN, undefined, symbols and long strings shown as such). */
  readonly shown: string
}

const show = (value: unknown): string =>
  typeof value === "string" && value.length > 40
    ? `a string of ${value.length} characters`
    : typeof value === "symbol" || value === undefined || typeof value === "number"
    ? String(value)
    : JSON.stringify(value) ?? String(value)

type Breakable = readonly [path: ReadonlyArray<string>, bad: ReadonlyArray<unknown>]

const breakables = (node: Node, path: ReadonlyArray<string>): ReadonlyArray<Breakable> => {
  if ("constant" in node) return []
  if ("leaf" in node) return [[path, badValuesOf(node.leaf, node.value, node.optional === true)]]
  const self: Breakable = [path, [...(node.optional === true ? [] : [undefined]), null, 5, "record", [], true]]
  return [self, ...Object.entries(node.record).flatMap(([name, child]) => breakables(child, [...path, name]))]
}

const validOf = (node: Node): unknown =>
  "constant" in node ? node.constant : "leaf" in node ? node.value : Object.fromEntries(
    Object.entries(node.record).map(([name, child]) => [name, validOf(child)])
  )

const replaced = (value: unknown, path: ReadonlyArray<string>, bad: unknown): unknown => {
  if (path.length === 0) return bad
  const [head, ...rest] = path
  const copy = { ...(value as Record<string, unknown>) }
  if (rest.length === 0 && bad === undefined) delete copy[head!]
  else copy[head!] = replaced(copy[head!], rest, bad)
  return copy
}

/** Every bad call of `entry`, as an arbitrary: one node replaced by a value that breaks its rule. */
export const badCallOf = (entry: EntryPoint): fc.Arbitrary<GeneratedBadCall> => {
  const options = entry.params.flatMap(([name, node], index) =>
    breakables(node, [name]).map(([path, bad]) => ({ index, path, bad }))
  )
  return fc.constantFrom(...options).chain(({ bad, index, path }) =>
    fc.constantFrom(...bad).map((value): GeneratedBadCall => ({
      args: entry.params.map(([, node], i) => i === index ? replaced(validOf(node), path.slice(1), value) : validOf(node)),
      path: path.join("."),
      shown: show(value)
    }))
  )
}

/** True when an error's `field` names `path` or a part of it (an element of a list, a key of a record). */
export const namesPath = (field: unknown, path: string): boolean =>
  typeof field === "string" && (field === path || field.startsWith(`${path}.`) || field.startsWith(`${path}[`))
