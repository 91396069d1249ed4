import type { ConnectorOperation, LimitedBy, ProjectionWatch, ProviderScope, SafeReissue } from "@connector-store/core"
import { type FakeProvider, keyOf, type LedgerEntry } from "./provider.js"
import { Crash, describeError } from "./scheduler.js"

/** What every invariant says, for reports and docs. */
export const INVARIANTS = {
  "no-blind-claim": "a claim granted after a request of the key applied (or while one may still arrive) carries a reissue",
  "no-double-apply": "the provider applied no key's write twice, except where a sanctioned reissue was one of them (a key replayed after retention collected its row starts over)",
  "nothing-lost": "every key a claim answered for, or that reached the provider, has its row, unless retention removed it by the keep rule; and no create or update committed that the provider never applied (a committed delete is judged by delete-removed)",
  "nothing-stuck": "after recovery (leases lapsed, everything due driven) no operation is attempted and no watch pending; before it, the due sweep lists every lapsed attempted row",
  "retention-keeps": "retention deletes only rows the keep rule lets go, and never a row last seen attempted or awaiting settlement",
  "relist-deletes-only-dead-documents": "a relist deletion is never applied to a document the provider still has an entity for, or one written since the run started",
  "no-pending-watch-never-due": "no pending watch is left without a due time",
  "no-give-up-swallows-a-later-winner": "no watch ends repair_failed with an ingress winner that no verification of that generation was claimed against",
  "no-failed-that-applied": "no operation reads failed (dead, not in doubt) when the provider applied it (or, for a delete under idempotent-delete, answered its entity gone): a write that landed was recorded as failed",
  "committed-has-watch": "every committed create or update has its watch, unless its document is gone: deleted locally, or a delete of it committed after the write",
  "delete-removed": "every committed delete's entity is gone at the provider and its watch retired (unless a later commit armed the entity again)",
  "lease-token-from-claim": "every store call a runner makes under a lease token passes the token its own latest claim of that operation handed out",
  "sent-under-lease": "no provider write leaves from a runner unless its markOperationSent answered sent under its latest claim (or that claim marked it sent itself), with nothing since answering that the lease is gone",
  "typed-rejections": "every store call that rejected, and every runner loop that rejected, did so with one of the store's error tags (or a simulated crash)",
  "leases-within-cap": "no scope with a cap (maxInFlight) holds more live leases (attempted, unexpired on the store's clock) than its cap, judged at every lease a claim or batch claim granted",
  "no-lease-while-paused": "no claim or batch claim leases an operation while its account or connector is paused on the store's clock (by pauseProvider, or by a retryable 429 recorded with a later retryAt, not resumed since)",
  "pause-stays-on-its-account": "a claim refused for a pause names its own account or connector, paused until then by a call or a 429 of that scope: a 429 on one account never pauses another"
} as const

/** The name of an invariant (see `INVARIANTS`). */
export type InvariantName = keyof typeof INVARIANTS

/** One broken invariant: its name and what broke it, naming keys, requests and actors. */
export interface InvariantViolation<Name extends InvariantName = InvariantName> {
  /** Which invariant. */
  readonly invariant: Name
  /** What broke it. */
  readonly detail: string
}

/** The tags of the store's errors: a rejection without one of them is untyped. */
export const STORE_ERROR_TAGS: ReadonlySet<string> = new Set([
  "InvalidInput", "PersistenceError", "ConcurrentUpdateExhausted", "ReservedArmReason", "WinnerReaderMissing",
  "WinnerReadFailed", "IdempotencyConflict", "StoreClosed", "OperatorActionRefused", "OperatorTargetNotFound",
  "RelistRunNotFound", "RelistRunNotComplete", "DeletionLimitExceeded", "SweepCandidateNotFound", "SweepOutcomeNotAllowed",
  "SweepCandidateWithdrawn", "SweepApplyFailed", "SyncLeaseLost", "SyncProgressExhausted", "SyncProgressRecomputeFailed",
  "PendingAuthStateTaken", "StoreSchemaNotReady", "CorruptRow", "ReentrantCall", "StoreSchemaTooNew"
])

/** True when `error` carries one of the store's error tags, or is a simulated `Crash` (the process gone, not a failure). */
export const isTypedRejection = (error: unknown): boolean => {
  const tag = (error as { _tag?: unknown } | null)?._tag
  return error instanceof Crash || (typeof tag === "string" && STORE_ERROR_TAGS.has(tag))
}

/** `typed-rejections`: what `who` (a store call, a runner loop, an actor) rejected with is one of the store's errors or a `Crash`. */
export const judgeRejection = (who: string, error: unknown): ReadonlyArray<InvariantViolation<"typed-rejections">> =>
  isTypedRejection(error) ? [] : [{ invariant: "typed-rejections", detail: `${who} rejected with ${describeError(error)}` }]

/** The key of a watch generation (`sourceID#repairGeneration`), as `EndState.claimedAgainst` is keyed. */
export const watchGenerationKey = (w: Pick<ProjectionWatch, "sourceID" | "repairGeneration">): string => `${w.sourceID}#${w.repairGeneration}`

const finished = (row: ConnectorOperation) => row.state === "committed" || row.state === "dead"

/** True when the lease on `row` is live at `now` (a lease expiring at t is live before t). */
const leaseLive = (row: ConnectorOperation, now: number) => row.leaseToken !== null && (row.leaseExpiresAt === null || row.leaseExpiresAt >= now)

const older = (a: ConnectorOperation, b: ConnectorOperation) =>
  a.createdAt < b.createdAt ||
  (a.createdAt === b.createdAt && (a.callerDID < b.callerDID || (a.callerDID === b.callerDID && a.operationID < b.operationID)))

/**
 * The retention keep rule, written from the operations guide without the
 * store's code: a finished row updated before `before`, under no live lease,
 * may go when it has no document, or when a newer row of its caller and a
 * newer row of its owner on that document are finished (and, for a
 * committed row, committed): the newest rows decide the document's state.
 * `rows` are the rows it is judged against.
 */
export const keepRuleLets = (row: ConnectorOperation, rows: ReadonlyArray<ConnectorOperation>, before: number, now: number): boolean => {
  if (!finished(row) || row.updatedAt >= before || leaseLive(row, now)) return false
  if (row.documentID === null) return true
  const newer = (party: "callerDID" | "ownerDID", ok: (o: ConnectorOperation) => boolean) =>
    rows.some((o) => o.documentID === row.documentID && o[party] === row[party] && ok(o) && older(row, o))
  const committed = (o: ConnectorOperation) => o.state === "committed"
  if (row.state === "committed" && !(newer("callerDID", committed) && newer("ownerDID", committed))) return false
  return newer("callerDID", finished) && newer("ownerDID", finished)
}

/** One `collectFinishedOperations` call, with the rows read right around it. */
export interface RetentionCall {
  /** How the call is named in a violation. */
  readonly call: string
  /** Every operation row just before the call. */
  readonly rowsBefore: ReadonlyArray<ConnectorOperation>
  /** Every operation row just after it. */
  readonly rowsAfter: ReadonlyArray<ConnectorOperation>
  /** The call's `before` parameter. */
  readonly before: number
  /** The store's clock at the call. */
  readonly now: number
  /** The newest version of a row seen anywhere in the run (an answer, a snapshot), by key; absent, the row itself. */
  readonly latestSeen?: ((key: string) => ConnectorOperation | undefined) | undefined
}

/** What one retention call removed, and the violations of removing it. */
export interface RetentionJudgement {
  /** The keys the call removed (their rows are gone, by retention, not lost). */
  readonly removed: ReadonlyArray<string>
  /** `retention-keeps` violations. */
  readonly violations: ReadonlyArray<InvariantViolation>
}

/**
 * Judges one retention call from the rows before and after it and the
 * newest version of each row seen: every row it removed must be one the
 * keep rule lets go (judged on the newest version seen of it, and against
 * the rows of either side, so a row made collectable in between is not
 * blamed), and none may have been last seen attempted or awaiting a settle
 * (a row revived since it was chosen).
 */
export const judgeRetention = ({ call, rowsBefore, rowsAfter, before, now, latestSeen }: RetentionCall): RetentionJudgement => {
  const remaining = new Set(rowsAfter.map(keyOf))
  const newest = (row: ConnectorOperation) => {
    const seen = latestSeen?.(keyOf(row))
    return seen !== undefined && seen.version > row.version ? seen : row
  }
  const context = [...rowsBefore.map(newest), ...rowsAfter]
  const removed: Array<string> = []
  const violations: Array<InvariantViolation> = []
  for (const row of rowsBefore) {
    const key = keyOf(row)
    if (remaining.has(key)) continue
    removed.push(key)
    const latest = newest(row)
    if (!finished(latest)) {
      violations.push({ invariant: "retention-keeps", detail: `${call} deleted ${key}, last seen ${latest.state} (version ${latest.version})` })
    } else if (!keepRuleLets(latest, context, before, now) && !keepRuleLets(row, context, before, now)) {
      violations.push({ invariant: "retention-keeps", detail: `${call} deleted ${key} (${latest.state}, updated ${latest.updatedAt}), which the keep rule keeps` })
    }
  }
  return { removed, violations }
}

/** A claim the store granted, as things stood the moment it answered. */
export interface GrantedClaim {
  /** Who claimed. */
  readonly actor: string
  /** The key, `callerDID/operationID`. */
  readonly key: string
  /** The reissue the claim handed out. */
  readonly reissue: SafeReissue | null
  /** True when, as the store answered, a request of the key had applied or might still arrive (`FakeProvider.possiblyLanded`). */
  readonly landedAtGrant: boolean
  /** True when a request of the key had applied (for the detail). */
  readonly applied: boolean
  /** True when the key was claimed again after retention removed its row: a new operation, outside its idempotency window. */
  readonly startedOver: boolean
  /** Where in the run it happened (a trace line), for the detail. */
  readonly at?: string | undefined
}

/** `no-blind-claim`: a claim granted after a request of its key applied, or while one may still arrive, must carry a reissue. */
export const judgeClaim = (claim: GrantedClaim): ReadonlyArray<InvariantViolation> =>
  claim.reissue !== null || !claim.landedAtGrant || claim.startedOver ? [] : [{
    invariant: "no-blind-claim",
    detail: `${claim.actor}'s claim of ${claim.key} answered reissue: null, but an earlier request of it ${claim.applied ? "was applied" : "is still in flight"}` +
      (claim.at === undefined ? "" : ` (${claim.at})`)
  }]

/** A relist deletion, as things stood the moment the local document was deleted. */
export interface RelistDeletion {
  /** Who applied it. */
  readonly actor: string
  /** The relist run. */
  readonly runID: string
  /** The candidate's source. */
  readonly sourceID: string
  /** The local document deleted. */
  readonly documentID: string
  /** The provider entities last written from that document. */
  readonly liveEntities: ReadonlyArray<string>
  /** True when a write-back of the document committed after the run started. */
  readonly writtenSinceRunStarted: boolean
}

/** `relist-deletes-only-dead-documents`: no provider entity written from the document, and no write-back of it committed since the run started. */
export const judgeRelistDeletion = (d: RelistDeletion): ReadonlyArray<InvariantViolation> =>
  d.liveEntities.length === 0 && !d.writtenSinceRunStarted ? [] : [{
    invariant: "relist-deletes-only-dead-documents",
    detail: `${d.actor} applied delete_local of ${d.documentID} (candidate ${d.sourceID} of run ${d.runID.slice(0, 8)}) while ` +
      (d.liveEntities.length > 0 ? `the provider has ${d.liveEntities.join(", ")} written from it` : "a write-back of it committed after the run started")
  }]

/** `no-double-apply`: the provider's own duplicate-apply check (`FakeProvider.check`), keys that started over excepted. */
export const judgeDoubleApply = (
  provider: Pick<FakeProvider, "check">,
  startedOver: ReadonlySet<string> = new Set()
): ReadonlyArray<InvariantViolation<"no-double-apply">> => provider.check({ startedOver })

/**
 * One store call of a runner that names an operation, as the run saw it
 * answered: what the lease judge reads.
 */
export interface LeaseCall {
  /** Its place among the run's calls and sends. */
  readonly seq: number
  /** The runner. */
  readonly actor: string
  /** The operation's key, `callerDID/operationID`. */
  readonly key: string
  /** The store method. */
  readonly method: string
  /** The lease token it passed, if any. */
  readonly token: string | null
  /** Its answer's outcome; null when it rejected. */
  readonly outcome: string | null
  /** For a claim answered `claimed`: the lease token it handed out. */
  readonly lease: string | null
  /** For a claim answered `claimed`: true when it marked the request sent itself (`markSent`). */
  readonly markedSent?: boolean | undefined
}

/** A provider write a runner sent, as the run saw it leave. */
export interface SentWrite {
  /** Its place among the run's calls and sends. */
  readonly seq: number
  /** The runner. */
  readonly actor: string
  /** The operation's key. */
  readonly key: string
  /** The request, in words (its ledger number when it left). */
  readonly what: string
}

/** The store methods that take or hand out an operation's lease: the calls `judgeLeases` reads. */
export const LEASE_METHODS: ReadonlySet<string> = new Set([
  "claimOperation", "markOperationSent", "recordAttemptFailure", "finalizeOperationAndArmWatch", "finalizeDeleteOperation", "renewOperationLease"
])

/** A token as a detail shows it: whole when short (the testkit's own are `lease-<n>`), else its last characters. */
export const shortToken = (token: string): string => token.length > 24 ? `…${token.slice(-6)}` : token

interface Held {
  readonly token: string | null
  readonly sendable: boolean
  readonly why: string
}

/**
 * The lease judge over a run's calls and sends, in their order (`seq`): a
 * call under a token its runner's latest claim of the key did not hand out
 * breaks `lease-token-from-claim` (named once per key: the re-drives repeat
 * it); a provider write that leaves while its runner is not marked sent
 * under its latest claim (by `markOperationSent` or by the claim itself
 * with `markSent`; never marked, or told since that the lease is
 * gone or released) breaks `sent-under-lease`. A call that rejected changes
 * nothing its runner holds.
 */
export const judgeLeases = (
  calls: ReadonlyArray<LeaseCall>,
  sends: ReadonlyArray<SentWrite>
): Array<InvariantViolation<"lease-token-from-claim" | "sent-under-lease">> => {
  const events = [...calls.map((call) => ({ seq: call.seq, call })), ...sends.map((send) => ({ seq: send.seq, send }))]
    .sort((a, b) => a.seq - b.seq)
  const held = new Map<string, Held>()
  const wrongToken = new Set<string>()
  const out: Array<InvariantViolation<"lease-token-from-claim" | "sent-under-lease">> = []
  for (const event of events) {
    if ("send" in event) {
      const { actor, key, what } = event.send
      const state = held.get(`${actor} ${key}`)
      if (state?.sendable !== true) {
        out.push({ invariant: "sent-under-lease", detail: `${actor} sent ${what} for ${key} although ${state?.why ?? "it never claimed the operation"}` })
      }
      continue
    }
    const call = event.call
    if (!LEASE_METHODS.has(call.method)) continue
    const id = `${call.actor} ${call.key}`
    const state = held.get(id)
    if (call.method === "claimOperation") {
      if (call.outcome === null) continue
      held.set(id, call.lease === null
        ? { token: null, sendable: false, why: `its claimOperation answered ${call.outcome}: it holds no lease` }
        : call.markedSent === true
        ? { token: call.lease, sendable: true, why: "" }
        : { token: call.lease, sendable: false, why: "its claim was never marked sent" })
      continue
    }
    if (call.token !== null && call.token !== state?.token && !wrongToken.has(call.key)) {
      wrongToken.add(call.key)
      out.push({
        invariant: "lease-token-from-claim",
        detail: `${call.actor} called ${call.method} on ${call.key} with lease token ${shortToken(call.token)}, but ` +
          (state?.token == null ? "no claim of its handed it a lease" : `its claim handed it ${shortToken(state.token)}`) +
          (call.outcome === null ? "" : ` (answered ${call.outcome})`)
      })
    }
    if (state === undefined || call.outcome === null) continue
    const own = call.token === state.token
    if (call.method === "markOperationSent") {
      held.set(id, own && (call.outcome === "sent" || call.outcome === "already-sent")
        ? { ...state, sendable: true }
        : { ...state, sendable: false, why: `its markOperationSent answered ${call.outcome}${own ? "" : " (under another token)"}` })
    } else if (call.method !== "renewOperationLease" || call.outcome !== "renewed") {
      held.set(id, { ...state, sendable: false, why: `its ${call.method} answered ${call.outcome}: the lease is ${call.outcome === "lease-lost" ? "gone" : "released"}` })
    }
  }
  return out
}

/**
 * Where a store call falls among a run's events: issued after event `from`,
 * answered at event `to`, on one count the run keeps. A call surely landed
 * before another only when it was answered before the other was issued.
 */
export interface CallSpan {
  /** The count when it was issued. */
  readonly from: number
  /** The count when its answer came (above `from`). */
  readonly to: number
}

/** A lease a claim or a batch claim granted, as the run saw it answered. */
export interface SeenLease {
  /** Who was granted it. */
  readonly actor: string
  /** The operation's key, `callerDID/operationID`. */
  readonly key: string
  /** The operation's connector. */
  readonly connectorName: string
  /** The operation's provider account. */
  readonly accountKey: string
  /** The store's clock when it was granted (the leased row's `updatedAt`). */
  readonly grantedAt: number
  /** When it lapses (`lease.expiresAt`). */
  readonly expiresAt: number
  /** The claim's span; the leases of one batch claim share theirs. */
  readonly span: CallSpan
  /** Where in the run it happened (a trace line), for the detail. */
  readonly at?: string | undefined
}

/** A call after which an operation may hold no lease: its finalize, a failure, an exhausted mark, a claim or batch that finished it, a settle, a retry. */
export interface SeenRelease {
  /** The operation's key. */
  readonly key: string
  /** The call's span. */
  readonly span: CallSpan
}

/**
 * A provider limit a call set: a scope's cap (null: cleared), a pause until
 * `until` (by `pauseProvider`, or by a retryable 429 recorded, not
 * lease-lost, with a `retryAt` later than the store's clock at it), or the
 * lifting of a pause.
 */
export type SeenLimit =
  | { readonly kind: "cap"; readonly scope: ProviderScope; readonly maxInFlight: number | null; readonly span: CallSpan }
  | { readonly kind: "pause"; readonly scope: ProviderScope; readonly until: number; readonly by: string; readonly span: CallSpan }
  | { readonly kind: "resume"; readonly scope: ProviderScope; readonly span: CallSpan }

/** A claim a provider limit kept from leasing (`scheduled` with `limitedBy`). */
export interface SeenRefusal {
  /** Who claimed. */
  readonly actor: string
  /** The operation's key. */
  readonly key: string
  /** The operation's connector. */
  readonly connectorName: string
  /** The operation's provider account. */
  readonly accountKey: string
  /** The scope and reason the claim answered. */
  readonly limitedBy: LimitedBy
  /** The claim's `nextAttemptAt` (a pause's end, for a pause). */
  readonly nextAttemptAt: number
  /** The claim's span. */
  readonly span: CallSpan
  /** Where in the run it happened (a trace line), for the detail. */
  readonly at?: string | undefined
}

/** What a run saw of provider limits on a store that enforces them: the ground truth the limit judges read. */
export interface LimitHistory {
  /** Every lease granted. */
  readonly leases: ReadonlyArray<SeenLease>
  /** Every call that may have ended an operation's lease other than a lease granted on it. */
  readonly releases: ReadonlyArray<SeenRelease>
  /** Every cap, pause and resume set. */
  readonly limits: ReadonlyArray<SeenLimit>
  /** Every claim a limit refused. */
  readonly refusals: ReadonlyArray<SeenRefusal>
}

const landedBefore = (a: CallSpan, b: CallSpan) => a.to < b.from
const mayLandBefore = (a: CallSpan, b: CallSpan) => a.from < b.to
const sameScope = (a: ProviderScope, b: ProviderScope) => a.connectorName === b.connectorName && (a.accountKey ?? "") === (b.accountKey ?? "")
const scopesOf = (op: { readonly connectorName: string; readonly accountKey: string }): ReadonlyArray<ProviderScope> =>
  [{ connectorName: op.connectorName, accountKey: op.accountKey }, { connectorName: op.connectorName }]
const inScope = (op: { readonly connectorName: string; readonly accountKey: string }, scope: ProviderScope) =>
  op.connectorName === scope.connectorName && (scope.accountKey === undefined || scope.accountKey === op.accountKey)
const label = (scope: ProviderScope) => scope.accountKey === undefined ? scope.connectorName : `${scope.connectorName}/${scope.accountKey}`
const where = (at: string | undefined) => at === undefined ? "" : ` (${at})`

/**
 * True when `lease` was surely live as `grant` was granted: another
 * operation's, granted before it (or by the same batch claim), unexpired on
 * the store's clock then, and neither released nor leased again by a call
 * that may have landed in between.
 */
const surelyLiveAt = (history: LimitHistory, lease: SeenLease, grant: SeenLease): boolean =>
  lease.key !== grant.key &&
  (landedBefore(lease.span, grant.span) || lease.span.from === grant.span.from) &&
  lease.expiresAt > grant.grantedAt &&
  ![...history.releases, ...history.leases.filter((other) => other !== lease)].some((call) =>
    call.key === lease.key && !landedBefore(call.span, lease.span) && mayLandBefore(call.span, grant.span))

/** The loosest cap `scope` may have had as `grant` was granted: null (none) unless a cap was surely set and every cap it may have had is one. */
const loosestCap = (history: LimitHistory, scope: ProviderScope, grant: SeenLease): number | null => {
  const caps = history.limits.flatMap((limit) => limit.kind === "cap" && sameScope(limit.scope, scope) ? [limit] : [])
  const surely = caps.filter((cap) => landedBefore(cap.span, grant.span))
  const possible = caps.filter((cap) => mayLandBefore(cap.span, grant.span) && !surely.some((later) => landedBefore(cap.span, later.span)))
  return surely.length === 0 || possible.some((cap) => cap.maxInFlight === null) ? null : Math.max(...possible.map((cap) => cap.maxInFlight!))
}

/** A pause of `scope` surely in force as `grant` was granted: set before it, ending after its time, and no resume that may have landed since. */
const surePause = (history: LimitHistory, scope: ProviderScope, grant: SeenLease) => {
  const ofScope = history.limits.filter((limit) => sameScope(limit.scope, scope))
  return ofScope.flatMap((pause) => pause.kind === "pause" ? [pause] : []).find((pause) =>
    landedBefore(pause.span, grant.span) && pause.until > grant.grantedAt &&
    !ofScope.some((resume) => resume.kind === "resume" && !landedBefore(resume.span, pause.span) && mayLandBefore(resume.span, grant.span)))
}

/**
 * `leases-within-cap`: at every lease granted, each of its scopes (its
 * account, its connector) with a cap held fewer surely live leases of other
 * operations than the cap (a batch claim's own leases count each other). A
 * cap counts only where every cap the scope may have had then is one.
 */
export const judgeLeasesWithinCap = (history: LimitHistory): Array<InvariantViolation<"leases-within-cap">> =>
  history.leases.flatMap((grant) =>
    scopesOf(grant).flatMap((scope): Array<InvariantViolation<"leases-within-cap">> => {
      const cap = loosestCap(history, scope, grant)
      if (cap === null) return []
      const live = history.leases.filter((lease) => inScope(lease, scope) && surelyLiveAt(history, lease, grant))
      return live.length < cap ? [] : [{
        invariant: "leases-within-cap",
        detail: `${grant.actor} was granted ${grant.key} in ${label(scope)} (maxInFlight ${cap}) at ${grant.grantedAt} while ` +
          `${live.map((lease) => `${lease.key} (${lease.actor}, until ${lease.expiresAt})`).join(", ")} held live leases there${where(grant.at)}`
      }]
    }))

/** `no-lease-while-paused`: no lease granted while a pause of its account or connector was surely in force at its time. */
export const judgeLeasesWhilePaused = (history: LimitHistory): Array<InvariantViolation<"no-lease-while-paused">> =>
  history.leases.flatMap((grant) =>
    scopesOf(grant).flatMap((scope): Array<InvariantViolation<"no-lease-while-paused">> => {
      const pause = surePause(history, scope, grant)
      return pause === undefined ? [] : [{
        invariant: "no-lease-while-paused",
        detail: `${grant.actor} was granted ${grant.key} at ${grant.grantedAt}, while ${label(scope)} was paused until ${pause.until} by ${pause.by}${where(grant.at)}`
      }]
    }))

/**
 * `pause-stays-on-its-account`: a claim refused for a pause names its own
 * account or connector, and a pause of that scope until the claim's
 * `nextAttemptAt` that may have landed before it.
 */
export const judgePauseScopes = (history: LimitHistory): Array<InvariantViolation<"pause-stays-on-its-account">> =>
  history.refusals.flatMap((refusal): Array<InvariantViolation<"pause-stays-on-its-account">> => {
    const { scope, reason } = refusal.limitedBy
    if (reason !== "paused") return []
    const own = scopesOf(refusal).some((mine) => sameScope(mine, scope))
    if (own && history.limits.some((pause) =>
      pause.kind === "pause" && sameScope(pause.scope, scope) && pause.until === refusal.nextAttemptAt && mayLandBefore(pause.span, refusal.span))) return []
    return [{
      invariant: "pause-stays-on-its-account",
      detail: `${refusal.actor}'s claim of ${refusal.key} (${refusal.connectorName}/${refusal.accountKey}) was refused as ${label(scope)} paused until ` +
        `${refusal.nextAttemptAt}, ${own ? "but no call or 429 paused it until then" : "neither its account nor its connector"}${where(refusal.at)}`
    }]
  })

/** Every provider limit judge over a run's `LimitHistory`: leases within caps, none while paused, pauses on their own scope. */
export const judgeProviderLimits = (
  history: LimitHistory
): Array<InvariantViolation<"leases-within-cap" | "no-lease-while-paused" | "pause-stays-on-its-account">> => [
  ...judgeLeasesWithinCap(history),
  ...judgeLeasesWhilePaused(history),
  ...judgePauseScopes(history)
]

/** A committed write-back as the commit judges read it, with the place of its commit in the run. */
export interface CommittedWrite {
  /** The operation's key. */
  readonly key: string
  /** Its kind. */
  readonly op: "create" | "update" | "delete"
  /** The entity it wrote, or (a delete) the entity it was asked to delete. */
  readonly sourceID: string
  /** The local document. */
  readonly documentID: string | null
  /** The place of the call that committed it (any count that grows through the run), or null when the run did not see it. */
  readonly committedAt: number | null
}

/** True when `b` committed after `a`, both commits seen. */
const committedAfter = (a: CommittedWrite, b: CommittedWrite) => b.committedAt !== null && a.committedAt !== null && b.committedAt > a.committedAt

/**
 * `committed-has-watch` over committed write-backs: a committed create or
 * update of a document has a watch of that document, unless the document
 * is gone: `documentGone` says so (deleted locally), or a delete of it
 * committed after the write (or one whose commit the run did not see).
 */
export const judgeCommitWatches = (
  committed: ReadonlyArray<CommittedWrite>,
  watches: ReadonlyArray<Pick<ProjectionWatch, "documentID">>,
  documentGone: (documentID: string) => boolean = () => false
): Array<InvariantViolation<"committed-has-watch">> => {
  const watched = new Set(watches.map((w) => w.documentID))
  return committed.flatMap((row): Array<InvariantViolation<"committed-has-watch">> => {
    if (row.op === "delete" || row.documentID === null || watched.has(row.documentID) || documentGone(row.documentID)) return []
    const deletedAfter = committed.some((other) => other.op === "delete" && other.documentID === row.documentID && (committedAfter(row, other) || other.committedAt === null))
    return deletedAfter ? [] : [{ invariant: "committed-has-watch", detail: `${row.key} committed → ${row.sourceID} for ${row.documentID}, which has no watch` }]
  })
}

/**
 * `delete-removed` over committed write-backs: a committed delete whose
 * entity the provider still has (`liveEntities`) was finalized without
 * being applied; one whose entity still has a watch that no later commit
 * on that entity armed left its watch behind.
 */
export const judgeDeletes = (
  committed: ReadonlyArray<CommittedWrite>,
  liveEntities: ReadonlySet<string>,
  watches: ReadonlyArray<Pick<ProjectionWatch, "sourceID" | "documentID" | "repairGeneration">>
): Array<InvariantViolation<"delete-removed">> =>
  committed.flatMap((row): Array<InvariantViolation<"delete-removed">> => {
    if (row.op !== "delete") return []
    const out: Array<InvariantViolation<"delete-removed">> = []
    if (liveEntities.has(row.sourceID)) {
      out.push({ invariant: "delete-removed", detail: `${row.key} is a committed delete of ${row.sourceID}, but the provider still has ${row.sourceID}: it was finalized without being applied` })
    }
    const rearmed = committed.some((other) => other.op !== "delete" && other.sourceID === row.sourceID && committedAfter(row, other))
    const watch = watches.find((w) => w.sourceID === row.sourceID)
    if (watch !== undefined && !rearmed) {
      out.push({ invariant: "delete-removed", detail: `${row.key} is a committed delete of ${row.sourceID}, but its watch (g${watch.repairGeneration}, ${watch.documentID}) is still there` })
    }
    return out
  })

/**
 * The attempted rows the due sweep should have listed at `now` but did
 * not: lease lapsed, due, and not among `listed` (the keys the sweep
 * answered with). What `EndState.missedBySweep` holds.
 */
export const missedBySweep = (rows: ReadonlyArray<ConnectorOperation>, listed: ReadonlySet<string>, now: number): Array<string> =>
  rows.filter((r) => r.state === "attempted" && (r.leaseExpiresAt ?? 0) <= now && (r.nextAttemptAt ?? 0) <= now && !listed.has(keyOf(r))).map(keyOf)

const appliedByKey = (ledger: ReadonlyArray<LedgerEntry>): ReadonlyMap<string, ReadonlyArray<LedgerEntry>> => {
  const out = new Map<string, Array<LedgerEntry>>()
  for (const entry of ledger) if (entry.applied) out.set(entry.request.key, [...(out.get(entry.request.key) ?? []), entry])
  return out
}

/** The end of a run, after recovery: what the store holds, what the provider took, and what the run knows happened. */
export interface EndState {
  /** The provider the run wrote to: its ledger, its live entities, and its own duplicate-apply check. */
  readonly provider: Pick<FakeProvider, "ledger" | "check"> & { readonly entities?: ReadonlyMap<string, unknown> | undefined }
  /** Every operation row. */
  readonly rows: ReadonlyArray<ConnectorOperation>
  /** Every watch row. */
  readonly watches: ReadonlyArray<ProjectionWatch>
  /** Keys some claim answered for: the store knows them. */
  readonly knownKeys: Iterable<string>
  /** Keys a retention call removed: their absence is no loss. */
  readonly collected: { has(key: string): boolean }
  /** Keys claimed again after retention removed them: new operations, judged neither for double apply nor for a commit the provider never saw. */
  readonly startedOver: ReadonlySet<string>
  /** Attempted rows whose lease had lapsed and that were due, but that the due sweep did not list (before recovery; see `missedBySweep`). */
  readonly missedBySweep?: ReadonlyArray<string> | undefined
  /** Winners an ingress brought in, per document. */
  readonly ingressWinners?: ReadonlyMap<string, ReadonlySet<string>> | undefined
  /** Per watch generation (`watchGenerationKey`), the winners current when a verifier's claim was granted. */
  readonly claimedAgainst?: ReadonlyMap<string, ReadonlySet<string>> | undefined
  /** Each local document's winner at the end, null when it is gone. */
  readonly winnerOf?: ((documentID: string) => string | null) | undefined
  /** The time the end is judged at (the store's clock): a pending watch's report says how far ahead it is due. */
  readonly judgedAt?: number | undefined
  /** Where in the run each key's commit was seen (any count that grows through the run); absent: not seen. Orders a delete against the writes of its document. */
  readonly committedAt?: ((key: string) => number | undefined) | undefined
  /** The entity each delete was asked to delete (its claim's `sourceID`), when the run knows it; else its row's. */
  readonly deleteTargetOf?: ((key: string) => string | null | undefined) | undefined
}

/** The committed write-backs of `state`'s rows, as the commit judges read them. */
export const committedWrites = ({ rows, committedAt, deleteTargetOf }: EndState): Array<CommittedWrite> =>
  rows.flatMap((row): Array<CommittedWrite> => {
    const key = keyOf(row)
    const sourceID = row.op === "delete" ? deleteTargetOf?.(key) ?? row.sourceID : row.sourceID
    return row.state !== "committed" || sourceID === null ? [] : [{ key, op: row.op, sourceID, documentID: row.documentID, committedAt: committedAt?.(key) ?? null }]
  })

/**
 * `nothing-lost`: every known key, and every key that reached the
 * provider, has its row unless retention removed it; no create or update
 * committed that never applied (a committed delete asked for its entity
 * gone, which `judgeDeleteRemoved` judges).
 */
export const judgeLost = ({ provider, rows, knownKeys, collected, startedOver }: EndState): ReadonlyArray<InvariantViolation<"nothing-lost">> => {
  const out: Array<InvariantViolation<"nothing-lost">> = []
  const present = new Set(rows.map(keyOf))
  for (const k of new Set([...knownKeys, ...provider.ledger.map((e) => e.request.key)])) {
    if (!present.has(k) && !collected.has(k)) out.push({ invariant: "nothing-lost", detail: `${k} has no row, and no retention call removed it` })
  }
  const applied = appliedByKey(provider.ledger)
  for (const row of rows) {
    const k = keyOf(row)
    if (row.state === "committed" && row.op !== "delete" && !applied.has(k) && !startedOver.has(k)) {
      out.push({ invariant: "nothing-lost", detail: `${k} is committed (→ ${row.sourceID}), but the provider never applied a request of it` })
    }
  }
  return out
}

/** `nothing-stuck`: no operation attempted and no watch pending (with a due time) after recovery, and none the due sweep missed before it. */
export const judgeStuck = ({ rows, watches, missedBySweep = [], judgedAt }: EndState): ReadonlyArray<InvariantViolation<"nothing-stuck">> => [
  ...missedBySweep.map((k): InvariantViolation<"nothing-stuck"> => ({ invariant: "nothing-stuck", detail: `${k}: attempted, lease lapsed and due, but the due sweep did not list it` })),
  ...rows.filter((r) => r.state === "attempted").map((r): InvariantViolation<"nothing-stuck"> => ({ invariant: "nothing-stuck", detail: `${keyOf(r)} still attempted after recovery` })),
  ...watches.filter((w) => w.verificationStatus === "pending_verification" && w.nextAttemptAt !== null).map((w): InvariantViolation<"nothing-stuck"> => ({
    invariant: "nothing-stuck",
    detail: `watch ${w.sourceID} g${w.repairGeneration} still pending after recovery, due at ${w.nextAttemptAt}${
      judgedAt === undefined ? "" : w.nextAttemptAt! > judgedAt ? ` (${w.nextAttemptAt! - judgedAt} ms after recovery ended)` : " (due, but never verified)"}`
  }))
]

/** True when `row` is a delete under `idempotent-delete`: a 404 or 410 for it means its entity is gone, as it asked. */
const goneIsApplied = (row: ConnectorOperation) =>
  row.op === "delete" && (row.reissueIntent as { readonly kind?: unknown } | null)?.kind === "idempotent-delete"

/**
 * `no-failed-that-applied`: no operation dead and not in doubt when the
 * provider applied a request of it, or, for a delete under
 * `idempotent-delete`, answered its entity gone.
 */
export const judgeFailedThatApplied = ({ provider, rows }: EndState): ReadonlyArray<InvariantViolation<"no-failed-that-applied">> =>
  rows.flatMap((row): ReadonlyArray<InvariantViolation<"no-failed-that-applied">> => {
    if (row.state !== "dead" || row.inDoubtSince !== null) return []
    const k = keyOf(row)
    const gone = goneIsApplied(row)
    const landed = provider.ledger.filter((e) => e.request.key === k && (e.applied || (gone && e.alreadyGone)))
    return landed.length === 0 ? [] : [{
      invariant: "no-failed-that-applied",
      detail: `${k} is dead and not in doubt, but the provider ${gone ? "deleted its entity or answered it gone" : "applied it"} (request #${landed.map((e) => e.n).join(", #")})`
    }]
  })

/**
 * `committed-has-watch`: every committed create or update of a document
 * has a watch of that document, unless the document is gone: deleted
 * locally (`winnerOf` answers null), or a delete of it committed after the
 * write (`judgeCommitWatches`).
 */
export const judgeCommittedWithoutWatch = (state: EndState): ReadonlyArray<InvariantViolation<"committed-has-watch">> =>
  judgeCommitWatches(committedWrites(state), state.watches, (documentID) => state.winnerOf?.(documentID) === null)

/**
 * `delete-removed`: every committed delete's entity is gone at the
 * provider (`provider.entities`; unjudged without it) and its watch
 * retired, unless a later commit armed the entity again (`judgeDeletes`).
 */
export const judgeDeleteRemoved = (state: EndState): ReadonlyArray<InvariantViolation<"delete-removed">> =>
  judgeDeletes(committedWrites(state), new Set(state.provider.entities?.keys() ?? []), state.watches)

/** `no-pending-watch-never-due`: a pending watch always has a due time. */
export const judgePendingNeverDue = ({ watches }: EndState): ReadonlyArray<InvariantViolation<"no-pending-watch-never-due">> =>
  watches.filter((w) => w.verificationStatus === "pending_verification" && w.nextAttemptAt === null).map((w) => ({
    invariant: "no-pending-watch-never-due",
    detail: `watch ${w.sourceID} g${w.repairGeneration} is pending with no due time`
  }))

/**
 * `no-give-up-swallows-a-later-winner`: no watch ends `repair_failed` with
 * an observed winner an ingress brought in, that no verification of that
 * generation was claimed against, and that is still the document's winner
 * (a winner that differs from both watermarks is still news: the audit
 * lists it and the next ingress opens; only one the watch records as seen
 * is swallowed).
 */
export const judgeSwallowedWinner = ({ watches, ingressWinners, claimedAgainst, winnerOf }: EndState): ReadonlyArray<InvariantViolation<"no-give-up-swallows-a-later-winner">> =>
  watches.flatMap((w): ReadonlyArray<InvariantViolation<"no-give-up-swallows-a-later-winner">> => {
    if (w.verificationStatus !== "repair_failed" || w.observedWinnerDigest === null) return []
    const ingressed = ingressWinners?.get(w.documentID)?.has(w.observedWinnerDigest) ?? false
    const compared = claimedAgainst?.get(watchGenerationKey(w))?.has(w.observedWinnerDigest) ?? false
    const hidden = winnerOf?.(w.documentID) === w.observedWinnerDigest
    return ingressed && !compared && hidden ? [{
      invariant: "no-give-up-swallows-a-later-winner",
      detail: `watch ${w.sourceID} g${w.repairGeneration} gave up with observed := ${w.observedWinnerDigest}, an ingress winner ` +
        `no verification of that generation was claimed against; the sweep will never list it again`
    }] : []
  })

/**
 * The judges of a write-back's end that need no ingress: no write applied
 * twice outside a sanctioned reissue (the provider's own `check()`),
 * nothing lost, nothing stuck, nothing failed that applied, no committed
 * write-back without its watch, no committed delete that left its entity
 * or its watch, no pending watch never due. What `checkRunnerLoop` judges
 * a run's end by.
 */
export const judgeWriteBackEnd = (
  state: EndState
): ReadonlyArray<InvariantViolation<"no-double-apply" | "nothing-lost" | "nothing-stuck" | "no-failed-that-applied" | "committed-has-watch" | "delete-removed" | "no-pending-watch-never-due">> => [
  ...judgeDoubleApply(state.provider, state.startedOver),
  ...judgeLost(state),
  ...judgeStuck(state),
  ...judgeFailedThatApplied(state),
  ...judgeCommittedWithoutWatch(state),
  ...judgeDeleteRemoved(state),
  ...judgePendingNeverDue(state)
]

/**
 * Every check over the end of a run, after recovery: `judgeWriteBackEnd`
 * (no double apply, nothing lost, stuck or failed that applied, no commit
 * without its watch, no delete that left its entity or watch, no pending
 * watch never due), and no give-up that swallowed a later winner.
 */
export const judgeEnd = (state: EndState): ReadonlyArray<InvariantViolation> => [
  ...judgeWriteBackEnd(state),
  ...judgeSwallowedWinner(state)
]
