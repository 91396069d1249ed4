import {
  formatOperationKey,
  formatProviderScope,
  formatWatchIdentity,
  type OperationKey,
  type OperatorActionOutcome,
  providerScope,
  type ProviderScope,
  type VerificationStatus,
  type WatchIdentity
} from "@connector-store/core"
import type { PageContext } from "./context.js"

/** One row's answer from the store: done, or refused (a guard's reason) or failed (any other error). */
export interface RowAnswer {
  readonly target: string
  readonly outcome: "done" | "refused" | "failed"
  readonly answer: string
}

/** An action the dashboard offers, through the same guarded store call as the CLI's. */
export interface DashboardAction {
  /** Its name in the URL (`/actions/<name>`). */
  readonly name: string
  /** The store call, as the audit log names it. */
  readonly call: string
  /** The button's words. */
  readonly label: string
  /** The row a `target` field names (a JSON array), or undefined when it names none. */
  readonly parse: (target: string) => unknown
  /** How the row is named in the audit log and on the page. */
  readonly identity: (row: never) => string
  /** The store call on one row; answers the store's answer in words, or throws the store's error. */
  readonly run: (ctx: PageContext, row: never, form: URLSearchParams) => Promise<string>
  /** The targets of a whole list filter (its query string), at most `max`, and whether more matched. */
  readonly bulk?: (ctx: PageContext, filter: URLSearchParams, max: number) => Promise<{ readonly targets: ReadonlyArray<string>; readonly more: boolean }>
  /** What the confirmation asks for besides the rows (e.g. how long a pause lasts), as form fields kept. */
  readonly fields?: ReadonlyArray<readonly [name: string, label: string, initial: string]>
}

const strings = (text: string, length: number): ReadonlyArray<string> | undefined => {
  try {
    const value: unknown = JSON.parse(text)
    return Array.isArray(value) && value.length === length && value.every((part) => typeof part === "string") ? value : undefined
  } catch {
    return undefined
  }
}

/** The `target` field of an operation. */
export const operationTarget = (key: OperationKey): string => JSON.stringify([key.callerDID, key.operationID])
/** The `target` field of a watch (or a sweep candidate: the same five parts). */
export const watchTarget = (id: WatchIdentity): string =>
  JSON.stringify([id.ownerDID, id.connectorName, id.model, id.accountKey, id.sourceID])
/** The `target` field of a sync state. */
export const syncTarget = (connectorName: string, ownerDID: string): string => JSON.stringify([connectorName, ownerDID])
/** The `target` field of a provider scope (`""`: the whole connector). */
export const scopeTarget = (scope: ProviderScope): string => JSON.stringify([scope.connectorName, scope.accountKey ?? ""])

const parseOperation = (text: string): OperationKey | undefined => {
  const parts = strings(text, 2)
  return parts === undefined ? undefined : { callerDID: parts[0]!, operationID: parts[1]! }
}
const parseIdentity = (text: string): WatchIdentity | undefined => {
  const parts = strings(text, 5)
  return parts === undefined
    ? undefined
    : { ownerDID: parts[0]!, connectorName: parts[1]!, model: parts[2]!, accountKey: parts[3]!, sourceID: parts[4]! }
}
const parseScope = (text: string): ProviderScope | undefined => {
  const parts = strings(text, 2)
  return parts === undefined ? undefined : providerScope(parts[0]!, parts[1] === "" ? undefined : parts[1])
}

const field = (filter: URLSearchParams, name: string): string | undefined => {
  const value = filter.get(name)
  return value === null || value === "" ? undefined : value
}

/** The operation filter of a list's query string, as `listOperations` takes it. */
export const operationFilterOf = (filter: URLSearchParams, now: number) => ({
  ownerDID: field(filter, "owner"),
  connectorName: field(filter, "connector"),
  callerDID: field(filter, "caller"),
  documentID: field(filter, "document"),
  dueBy: filter.get("due") === "yes" ? now : undefined,
  inDoubt: filter.get("inDoubt") === "yes" ? true : undefined
})

/** The watch filter of a list's query string, as `listWatches` takes it. */
export const watchFilterOf = (filter: URLSearchParams, now: number) => ({
  ownerDID: field(filter, "owner"),
  connectorName: field(filter, "connector"),
  documentID: field(filter, "document"),
  dueBy: filter.get("due") === "yes" ? now : undefined
})

const operationsIn = (states: ReadonlyArray<"dead" | "reconcile_only">) =>
async (ctx: PageContext, filter: URLSearchParams, max: number) => {
  const page = await ctx.store.listOperations({ ...operationFilterOf(filter, ctx.now), states, limit: max })
  return { targets: page.items.map(operationTarget), more: page.nextCursor !== null }
}

const minutes = (form: URLSearchParams, name: string, fallback: number): number => {
  const text = form.get(name)
  const value = text === null || text.trim() === "" ? fallback : Number(text)
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`${name} must be a number of minutes, 0 or more`)
  return Math.round(value * 60_000)
}

/** Every action, by name. */
export const ACTIONS: ReadonlyMap<string, DashboardAction> = new Map(([
  {
    name: "retry",
    call: "retryOperation",
    label: "Retry",
    parse: parseOperation,
    identity: formatOperationKey,
    run: async (ctx, key: OperationKey) => {
      const row = await ctx.store.retryOperation(key)
      return `retried: ${row.state}, due now, attempts reset`
    },
    bulk: operationsIn(["dead"])
  },
  {
    name: "give-up",
    call: "settleOperation",
    label: "Give up (settle as not applied)",
    parse: parseOperation,
    identity: formatOperationKey,
    run: async (ctx, key: OperationKey) => {
      const result = await ctx.store.settleOperation(key, { outcome: "dead" })
      return `settled as ${result.operation.state}`
    },
    bulk: operationsIn(["reconcile_only"])
  },
  {
    name: "reconcile",
    call: "settleOperation",
    label: "Reconcile as committed",
    parse: parseOperation,
    identity: formatOperationKey,
    fields: [["sourceID", "provider source id", ""], ["documentID", "local document id", ""], ["providerEtag", "provider etag", ""], [
      "resultEntity",
      "provider entity (JSON)",
      "null"
    ], ["watchDueMinutes", "first verification in (minutes)", "0"]],
    run: async (ctx, key: OperationKey, form) => {
      let entity: unknown
      try {
        entity = JSON.parse(form.get("resultEntity") || "null")
      } catch {
        throw new RangeError("the provider entity must be JSON")
      }
      const result = await ctx.store.settleOperation(key, {
        outcome: "committed",
        sourceID: form.get("sourceID") ?? "",
        documentID: form.get("documentID") ?? "",
        providerEtag: form.get("providerEtag") || null,
        resultEntity: entity,
        watchDueAt: ctx.now + minutes(form, "watchDueMinutes", 0)
      })
      return `settled as ${result.operation.state}` + (result.watch === null ? "" : `; armed watch ${formatWatchIdentity(result.watch)}`)
    }
  },
  {
    name: "rearm-watch",
    call: "rearmWatch",
    label: "Re-arm",
    parse: parseIdentity,
    identity: formatWatchIdentity,
    run: async (ctx, identity: WatchIdentity) => {
      const watch = await ctx.store.rearmWatch(identity, { dueAt: ctx.now })
      return `re-armed: generation ${watch.repairGeneration}, ${watch.verificationStatus}, due now`
    },
    bulk: async (ctx, filter, max) => {
      const status = field(filter, "status")
      const statuses: ReadonlyArray<VerificationStatus> = status === "pending_verification" || status === "verified" ? [status] : ["repair_failed"]
      const page = await ctx.store.listWatches({ ...watchFilterOf(filter, ctx.now), statuses, limit: max })
      return { targets: page.items.map(watchTarget), more: page.nextCursor !== null }
    }
  },
  {
    name: "release-sync-lease",
    call: "releaseSyncLeaseByOperator",
    label: "Release lease",
    parse: (text) => {
      const parts = strings(text, 2)
      return parts === undefined ? undefined : { connectorName: parts[0]!, ownerDID: parts[1]! }
    },
    identity: (key: { connectorName: string; ownerDID: string }) => `${key.connectorName}/${key.ownerDID}`,
    run: async (ctx, key: { connectorName: string; ownerDID: string }, form) => {
      const result = await ctx.store.releaseSyncLeaseByOperator(key.connectorName, key.ownerDID, { force: form.get("force") === "yes" })
      return result.outcome === "released" ? `released the ${result.was} lease` : "held no lease; nothing changed"
    }
  },
  {
    name: "pause",
    call: "pauseProvider",
    label: "Pause",
    parse: parseScope,
    identity: formatProviderScope,
    fields: [["minutes", "pause for (minutes)", "15"]],
    run: async (ctx, scope: ProviderScope, form) => {
      const until = ctx.now + minutes(form, "minutes", 15)
      const row = await ctx.store.pauseProvider({ ...scope, until })
      return `paused until ${new Date(row.pausedUntil ?? until).toISOString()}`
    }
  },
  {
    name: "resume",
    call: "resumeProvider",
    label: "Resume",
    parse: parseScope,
    identity: formatProviderScope,
    run: async (ctx, scope: ProviderScope) => {
      const row = await ctx.store.resumeProvider(scope)
      return row === null ? "has no limits; nothing changed" : "resumed: no longer paused"
    }
  },
  {
    name: "cap",
    call: "setProviderLimit",
    label: "Set cap",
    parse: parseScope,
    identity: formatProviderScope,
    fields: [["maxInFlight", "at most in flight (blank: no cap)", ""]],
    run: async (ctx, scope: ProviderScope, form) => {
      const text = (form.get("maxInFlight") ?? "").trim()
      const maxInFlight = text === "" || text === "none" ? null : /^\d+$/.test(text) ? Number(text) : Number.NaN
      if (Number.isNaN(maxInFlight)) throw new RangeError("the cap must be a whole number, or blank for none")
      const row = await ctx.store.setProviderLimit({ ...scope, maxInFlight })
      return row.maxInFlight === null ? "no cap" : `at most ${row.maxInFlight} in flight`
    }
  },
  {
    name: "rearm-candidate",
    call: "rearmSweepCandidate",
    label: "Re-arm candidate",
    parse: parseIdentity,
    identity: formatWatchIdentity,
    run: async (ctx, identity: WatchIdentity) => {
      const outcome = await ctx.store.rearmSweepCandidate(identity)
      return outcome === "rearmed" ? "re-armed: open again, apply attempts reset" : "not given up; nothing changed"
    }
  },
  {
    name: "abandon-run",
    call: "abandonRelistRun",
    label: "Abandon run",
    parse: (text) => strings(text, 1)?.[0],
    identity: (runID: string) => runID,
    run: async (ctx, runID: string) => {
      const outcome = await ctx.store.abandonRelistRun(runID)
      return outcome === "abandoned" ? "abandoned: takes no more pages, yields no candidates" : "had already ended; nothing changed"
    }
  }
] as ReadonlyArray<DashboardAction>).map((action) => [action.name, action]))

/** A store error (or any other) in words: its tag and message, never a stack. */
export const errorWords = (error: unknown): { readonly refused: boolean; readonly words: string } => {
  const tag = typeof error === "object" && error !== null ? (error as { _tag?: unknown })._tag : undefined
  const reason = typeof error === "object" && error !== null ? (error as { reason?: unknown }).reason : undefined
  const message = error instanceof Error ? error.message : String(error)
  const refused = tag === "OperatorActionRefused" || tag === "OperatorTargetNotFound" || tag === "InvalidInput" || error instanceof RangeError
  const words = tag === "OperatorActionRefused" && typeof reason === "string" ? `refused: ${reason}` : typeof tag === "string" ? `${tag}: ${message}` : message
  return { refused, words }
}

/** Runs `action` on each target in turn, each through its own store call; a failure of one does not stop the others. */
export const runAction = async (
  ctx: PageContext,
  action: DashboardAction,
  targets: ReadonlyArray<string>,
  form: URLSearchParams
): Promise<ReadonlyArray<RowAnswer>> => {
  const answers: Array<RowAnswer> = []
  for (const target of targets) {
    const row = action.parse(target)
    if (row === undefined) {
      answers.push({ target, outcome: "refused", answer: "not a row this page names" })
      continue
    }
    const name = (action.identity as (row: unknown) => string)(row)
    try {
      answers.push({ target: name, outcome: "done", answer: await (action.run as (c: PageContext, r: unknown, f: URLSearchParams) => Promise<string>)(ctx, row, form) })
    } catch (error) {
      const { refused, words } = errorWords(error)
      answers.push({ target: name, outcome: refused ? "refused" : "failed", answer: words })
    }
  }
  return answers
}

/** The outcome of a whole action from its rows' answers. */
export const outcomeOf = (answers: ReadonlyArray<RowAnswer>): OperatorActionOutcome => {
  const done = answers.filter((answer) => answer.outcome === "done").length
  if (done === answers.length) return "done"
  if (done > 0) return "partial"
  return answers.some((answer) => answer.outcome === "failed") ? "failed" : "refused"
}
