import { Clock, Effect, Option } from "effect"
import type { ConcurrentUpdateExhausted, CorruptRow, InvalidInput, PersistenceError } from "../errors.js"
import { decideLimitedClaim, pauseAfterFailure } from "../limits/claim.js"
import { doubtedByFailover } from "../operation/failover.js"
import { ServerHistory } from "../ports/ServerHistory.js"
import { countDoubtfulClaim } from "./serverHistory.js"
import {
  LIMIT_INPUT_SHAPE,
  limitInputChecks,
  PAUSE_INPUT_SHAPE,
  pauseInputChecks,
  type ProviderLimitInput,
  type ProviderPauseInput,
  SCOPE_SHAPE,
  scopeChecks
} from "../limits/checks.js"
import {
  type ClaimLimit,
  decideClaimLimit,
  decidePause,
  decideResume,
  decideSetLimit,
  isPaused,
  type LimitDecision,
  limitsClaims,
  roomUnder
} from "../limits/decisions.js"
import {
  formatProviderScope,
  type ProviderLimit,
  type ProviderScope,
  providerScope,
  compareScopes,
  type ScopeLoad,
  scopeKey,
  scopesOfAccount
} from "../limits/ProviderLimit.js"
import { type AttemptFailure, type AttemptFailureResult, decideAttemptFailure } from "../operation/attempt.js"
import { type ClaimOperationInput, type ClaimResult, decideDueClaim } from "../operation/claim.js"
import { type ConnectorOperation, formatOperationKey, type OperationKey } from "../operation/ConnectorOperation.js"
import type { DueOperationPosition } from "../operation/due.js"
import { fairStart } from "../due/fair.js"
import { admitUnderLimits, scopesPassedOver } from "../limits/batch.js"
import { OperationEntropy } from "../operation/entropy.js"
import { IdempotencyConflict } from "../operation/IdempotencyConflict.js"
import { OperationPolicy } from "../operation/policy.js"
import { OperationRepository } from "../ports/OperationRepository.js"
import { ProviderLimitRepository } from "../ports/ProviderLimitRepository.js"
import { Transactor } from "../ports/Transactor.js"
import type { Millis } from "../watch/ProjectionWatch.js"
import { taking, validated } from "../validation.js"
import { LostRace, requireWon, retryOnLostRace } from "./run.js"

type WriteErrors = InvalidInput | PersistenceError | ConcurrentUpdateExhausted | CorruptRow

/** The provider limits half of the store's Effect API: per-scope pauses and concurrency caps, shared through the database. */
export interface LimitMethods {
  /** Sets (or with null clears) the scope's cap on live operation leases; answers its limits as they now stand. */
  readonly setProviderLimit: (limit: ProviderLimitInput) => Effect.Effect<ProviderLimit, WriteErrors>
  /** Pauses the scope until `until` (never shortening a later pause); answers its limits as they now stand. */
  readonly pauseProvider: (pause: ProviderPauseInput) => Effect.Effect<ProviderLimit, WriteErrors>
  /** Lifts the scope's pause at once (its cap stays); none when the scope has no limits row. */
  readonly resumeProvider: (scope: ProviderScope) => Effect.Effect<Option.Option<ProviderLimit>, WriteErrors>
  /** The scope's limits row, if it has one (an ended pause reads as it was stored). */
  readonly getProviderLimit: (scope: ProviderScope) => Effect.Effect<Option.Option<ProviderLimit>, InvalidInput | PersistenceError | CorruptRow>
  /** Every scope's limits row, by connector then account key (a connector's own row first). */
  readonly listProviderLimits: () => Effect.Effect<ReadonlyArray<ProviderLimit>, PersistenceError | CorruptRow>
}

/** The scope as given, with an absent account key left out. */
const normalized = (scope: ProviderScope): ProviderScope => providerScope(scope.connectorName, scope.accountKey)

/** Writes a limit decision (a lost insert or versioned update abandons the try) and answers the row as it stands. */
const applyLimit = (
  repo: ProviderLimitRepository["Type"],
  row: ProviderLimit | undefined,
  decision: LimitDecision
): Effect.Effect<ProviderLimit, PersistenceError | LostRace> => {
  const write = decision.write
  if (write === undefined) return Effect.succeed(decision.limit)
  const won = write.kind === "insert" || row === undefined ? repo.insert(write.next) : repo.update(row, write.next)
  return Effect.as(Effect.flatMap(won, requireWon), decision.limit)
}

const SCOPE_NAMES = ["scope"]
const SCOPE_TAKINGS = [SCOPE_SHAPE]

/** Builds the provider limit methods over the ports. */
export const makeLimitMethods = Effect.gen(function*() {
  const repo = yield* ProviderLimitRepository
  const { withTransaction } = yield* Transactor

  /** One locked read-decide-write of a scope's row, retried whole on a lost race. */
  const transition = <A>(
    method: string,
    scope: ProviderScope,
    decide: (row: ProviderLimit | undefined, now: Millis) => Effect.Effect<A, PersistenceError | LostRace>
  ) =>
    Effect.suspend(() =>
      retryOnLostRace(
        method,
        formatProviderScope(scope),
        withTransaction(Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          return yield* decide(Option.getOrUndefined(yield* repo.lockRead(scope)), now)
        }))
      )
    )

  const methods: LimitMethods = {
    setProviderLimit: taking("setProviderLimit", ["limit"], [LIMIT_INPUT_SHAPE], (limit: ProviderLimitInput) =>
      validated("setProviderLimit", limitInputChecks(limit), () => {
        const scope = normalized(limit)
        return transition("setProviderLimit", scope, (row, now) =>
          applyLimit(repo, row, decideSetLimit(row, scope, limit.maxInFlight, now)))
      })),

    pauseProvider: taking("pauseProvider", ["pause"], [PAUSE_INPUT_SHAPE], (pause: ProviderPauseInput) =>
      validated("pauseProvider", pauseInputChecks(pause), () => {
        const scope = normalized(pause)
        return transition("pauseProvider", scope, (row, now) => applyLimit(repo, row, decidePause(row, scope, pause, now)))
      })),

    resumeProvider: taking("resumeProvider", SCOPE_NAMES, SCOPE_TAKINGS, (scope: ProviderScope) =>
      validated("resumeProvider", scopeChecks("scope", scope), () => {
        const at = normalized(scope)
        return transition("resumeProvider", at, (row, now) => {
          const decision = decideResume(row, at, now)
          return decision === undefined ? Effect.succeed(Option.none()) : Effect.map(applyLimit(repo, row, decision), Option.some)
        })
      })),

    getProviderLimit: taking("getProviderLimit", SCOPE_NAMES, SCOPE_TAKINGS, (scope: ProviderScope) =>
      validated("getProviderLimit", scopeChecks("scope", scope), () => repo.get(normalized(scope)))),

    listProviderLimits: () => repo.list()
  }
  return methods
})

/** The operation transitions provider limits touch, on the ports, the operation's row locked before any limits row. */
export const makeLimitedOperations = Effect.gen(function*() {
  const limits = yield* ProviderLimitRepository
  const operations = yield* OperationRepository
  const { withTransaction } = yield* Transactor
  const policy = yield* OperationPolicy
  const entropy = yield* OperationEntropy
  const history = Option.getOrUndefined(yield* Effect.serviceOption(ServerHistory))

  /** The loads of the capped scopes among `rows` at `now`, by scope key (a pause in force needs none). */
  const loadsOf = (rows: ReadonlyArray<ProviderLimit>, now: Millis): Effect.Effect<ReadonlyMap<string, ScopeLoad>, PersistenceError> => {
    const capped = rows.some((row) => isPaused(row, now)) ? [] : rows.filter((row) => row.maxInFlight !== null).map((row) => row.scope)
    return capped.length === 0
      ? Effect.succeed(new Map())
      : Effect.map(limits.liveLeases(capped, now), (loads) => new Map(capped.map((scope, i) => [scopeKey(scope), loads[i]!])))
  }

  /** The limit that keeps an operation of this account from leasing at `now`, its scopes' rows locked. */
  const claimLimit = (connectorName: string, accountKey: string, now: Millis) =>
    Effect.flatMap(limits.lockForAccount(connectorName, accountKey), (rows) =>
      Effect.map(loadsOf(rows, now), (loads): ClaimLimit | undefined =>
        decideClaimLimit(rows, (row) => loads.get(scopeKey(row.scope)), now)))

  /**
   * A claim in one transaction: the row locked, then (when it would lease) its scopes' limits locked and live leases counted
   * under that lock, so two runners cannot both take a scope's last slot.
   */
  const claimLocked = (input: ClaimOperationInput): Effect.Effect<ClaimResult, PersistenceError | IdempotencyConflict | ConcurrentUpdateExhausted> =>
    retryOnLostRace("claimOperation", formatOperationKey(input), withTransaction(Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const fresh = { nodeKey: entropy.token(), incarnation: entropy.token(), leaseToken: entropy.token() }
      const row = Option.getOrUndefined(yield* operations.lockRead(input))
      const doubt = history?.doubtAt(now)
      const plain = decideLimitedClaim(row, input, fresh, policy, undefined, now, doubt)
      if (plain.conflict) return yield* new IdempotencyConflict({ callerDID: input.callerDID, operationID: input.operationID })
      const limit = plain.result.outcome === "claimed" ? yield* claimLimit(input.connectorName, input.accountKey, now) : undefined
      const decision = limit === undefined ? plain : decideLimitedClaim(row, input, fresh, policy, limit, now, doubt)
      if (decision.conflict) return yield* new IdempotencyConflict({ callerDID: input.callerDID, operationID: input.operationID })
      if (decision.next !== undefined) {
        yield* requireWon(yield* (row === undefined ? operations.insert(decision.next) : operations.update(row, decision.next)))
        if (history !== undefined && doubtedByFailover(row, decision.result.outcome, doubt, now)) countDoubtfulClaim(history)
      }
      return decision.result
    })))

  /** `claimOperation` under limits: the plain claim while none of the account's limits can hold it, else the locked claim. */
  const claim = <E>(
    input: ClaimOperationInput,
    plain: (input: ClaimOperationInput) => Effect.Effect<ClaimResult, E>
  ): Effect.Effect<ClaimResult, E | PersistenceError | IdempotencyConflict | ConcurrentUpdateExhausted> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.flatMap(limits.forAccount(input.connectorName, input.accountKey), (rows) =>
        rows.some((row) => limitsClaims(row, now))
          ? claimLocked(input) as Effect.Effect<ClaimResult, E | PersistenceError | IdempotencyConflict | ConcurrentUpdateExhausted>
          : plain(input)))

  /** `recordAttemptFailure` of a retryable 429: the failure decided and its account paused in one transaction. */
  const attemptFailure = (
    key: OperationKey,
    failure: AttemptFailure,
    random: number
  ): Effect.Effect<AttemptFailureResult, PersistenceError | ConcurrentUpdateExhausted> =>
    retryOnLostRace("recordAttemptFailure", formatOperationKey(key), withTransaction(Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const row = Option.getOrUndefined(yield* operations.lockRead(key))
      const decision = decideAttemptFailure(row, failure, policy, random, now)
      const pause = pauseAfterFailure(failure, decision.result, now)
      if (decision.next !== undefined && row !== undefined) yield* requireWon(yield* operations.update(row, decision.next))
      if (pause !== undefined && row !== undefined) {
        const scope = { connectorName: row.connectorName, accountKey: row.accountKey }
        const current = Option.getOrUndefined(yield* limits.lockRead(scope))
        yield* applyLimit(limits, current, decidePause(current, scope, pause, now))
      }
      return decision.result
    })))

  /**
   * A batch claim under limits, in the caller's transaction: paused and full scopes kept out of the read; page by page, the
   * capped scopes reached are locked (in key order across pages) with their live leases counted, and each lease admitted while
   * its scopes have room (`admitUnderLimits`), at most `pages` pages.
   */
  const claimDue = (
    limit: number,
    leaseMs: number,
    pages: number,
    cursor: string | undefined
  ): Effect.Effect<{
    readonly claimed: ReadonlyArray<DueLease>
    readonly finished: ReadonlyArray<ConnectorOperation>
    readonly scanned: string | undefined
  }, PersistenceError> =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const active = yield* limits.listActive(now)
      const activeLoads = yield* loadsOf(active.filter((row) => !isPaused(row, now)), now)
      const passedOver = new Map(scopesPassedOver(active, (row) => activeLoads.get(scopeKey(row.scope)), now).map((scope) => [scopeKey(scope), scope]))
      const cappedAtStart = new Map(active.filter((row) => row.maxInFlight !== null).map((row) => [scopeKey(row.scope), row.scope]))
      const locked = new Map<string, ProviderLimit>()
      let highest: ProviderScope | undefined
      let room: ReadonlyMap<string, number> = new Map()
      const claimed: Array<DueLease> = []
      const finished: Array<ConnectorOperation> = []
      let at = fairStart<DueOperationPosition>(cursor)
      let scanned: string | undefined
      for (let page = 0; page < pages && claimed.length + finished.length < limit; page++) {
        const wanted = limit - claimed.length - finished.length
        const read = yield* operations.lockDuePage(now, at, wanted, Array.from(passedOver.values()))
        if (page === 0) scanned = read.scanned
        // The capped scopes this page reaches, locked in key order after the ones locked before: a scope that
        // sorts before those is left for a later batch, so two batches never lock in crossing orders.
        const reached = new Map(read.rows.flatMap((row) => scopesOfAccount(row.connectorName, row.accountKey))
          .filter((scope) => cappedAtStart.has(scopeKey(scope)) && !locked.has(scopeKey(scope)))
          .map((scope) => [scopeKey(scope), scope] as const))
        const lockable = Array.from(reached.values()).sort(compareScopes)
        for (const scope of lockable.filter((scope) => highest !== undefined && compareScopes(scope, highest) <= 0)) {
          passedOver.set(scopeKey(scope), scope)
        }
        const toLock = lockable.filter((scope) => highest === undefined || compareScopes(scope, highest) > 0)
        const fresh = toLock.length === 0 ? [] : yield* limits.lockScopes(toLock)
        if (toLock.length > 0) highest = toLock[toLock.length - 1]
        for (const row of fresh) locked.set(scopeKey(row.scope), row)
        const capped = fresh.filter((row) => row.maxInFlight !== null)
        const loads = capped.length === 0 ? [] : yield* limits.liveLeases(capped.map((row) => row.scope), now)
        room = new Map([...room, ...capped.map((row, i) => [scopeKey(row.scope), roomUnder(row.maxInFlight, loads[i]!.live)] as const)])
        const doubt = history?.doubtAt(now)
        const decided = read.rows.map((row) => ({ row, decision: decideDueClaim(row, entropy.token(), leaseMs, policy, now, doubt) }))
        const leasing = decided.filter(({ decision, row }) =>
          decision.result.outcome === "claimed" &&
          scopesOfAccount(row.connectorName, row.accountKey).every((scope) => !passedOver.has(scopeKey(scope))))
        const admission = admitUnderLimits(
          leasing.map((entry) => ({ connectorName: entry.row.connectorName, accountKey: entry.row.accountKey, entry })),
          locked,
          room,
          now
        )
        room = admission.room
        const admitted = new Set(admission.admitted.map(({ entry }) => entry))
        const writes = decided.filter((entry) => entry.decision.next !== undefined && (entry.decision.result.outcome !== "claimed" || admitted.has(entry)))
        const won = yield* operations.updateAll(writes.map(({ decision, row }) => [row, decision.next!] as const))
        writes.forEach(({ decision, row }, i) => {
          if (!won[i]) return
          if (history !== undefined && doubtedByFailover(row, decision.result.outcome, doubt, now)) countDoubtfulClaim(history)
          if (decision.result.outcome === "claimed") claimed.push(decision.result)
          else if (decision.result.outcome === "finished") finished.push(decision.result.operation)
        })
        for (const [key, row] of locked) {
          if (isPaused(row, now) || (row.maxInFlight !== null && (room.get(key) ?? 0) <= 0)) passedOver.set(key, row.scope)
        }
        if (!read.more) break
        at = read.last
      }
      return { claimed, finished, scanned }
    })

  return { claim, attemptFailure, claimDue }
})

/** A lease a batch claim took (a `claimed` `ClaimResult`). */
type DueLease = Extract<ClaimResult, { readonly outcome: "claimed" }>
