import type {
  AttemptFailure,
  ClaimOperationInput,
  DeferInput,
  FailureKind,
  FinalizeOperationInput,
  Millis,
  OperationKey,
  ReissueIntent,
  VerificationInput,
  WatchIdentity
} from "@connector-store/core"
import fc from "fast-check"
import { REQUEST_FATES, type RequestFate } from "./provider.js"

/**
 * Arbitraries for every input of the store's public API, for your own
 * `fc.assert` properties. Identities come from small pools, so generated
 * calls meet each other (the same key claimed twice, two watches of one
 * document); times come with their edges (a lease expiring exactly now,
 * equal timestamps, ties).
 */

/** An id from a small pool (`prefix-1` … `prefix-n`), so generated calls collide. */
export const pooledID = (prefix: string, n = 3): fc.Arbitrary<string> => fc.integer({ min: 1, max: n }).map((i) => `${prefix}-${i}`)

/** A DID from a small pool. */
export const did = (role = "user", n = 3): fc.Arbitrary<string> => pooledID(`did:example:${role}`, n)

/** An operation's idempotency key: its caller and its id. */
export const operationKey = (): fc.Arbitrary<OperationKey> =>
  fc.record({ callerDID: did("device", 2), operationID: pooledID("op", 4) })

/** A watch identity: owner, connector, model, account and the provider entity. */
export const watchIdentity = (): fc.Arbitrary<WatchIdentity> =>
  fc.record({
    ownerDID: did("owner", 2),
    connectorName: fc.constantFrom("calendar", "tasks"),
    model: fc.constantFrom("Event", "Task"),
    accountKey: fc.constantFrom("alice@example.com", "bob@example.com"),
    sourceID: pooledID("evt", 4)
  })

/** A reissue intent: a conditional update, a deterministic create or a reconcile. */
export const reissueIntent = (): fc.Arbitrary<ReissueIntent> =>
  fc.oneof(
    pooledID("etag", 3).map((ifMatch) => ({ kind: "conditional-update" as const, ifMatch })),
    pooledID("evt", 4).map((providerID) => ({ kind: "deterministic-create" as const, providerID })),
    fc.constant({ kind: "reconcile" as const })
  )

/** A complete `claimOperation` input whose fields agree (an update names its entity and bases its intent on an etag). */
export const claimInput = (): fc.Arbitrary<ClaimOperationInput> =>
  fc.record({
    key: operationKey(),
    identity: watchIdentity(),
    op: fc.constantFrom("create" as const, "update" as const),
    etag: pooledID("etag", 3),
    payload: pooledID("sha256:payload", 3),
    documentID: pooledID("doc", 3),
    reconcile: fc.boolean(),
    leaseMs: fc.option(fc.constantFrom(1, 1_000, 30_000), { nil: undefined })
  }).map(({ key, identity, op, etag, payload, documentID, reconcile, leaseMs }): ClaimOperationInput => ({
    ...key,
    ownerDID: identity.ownerDID,
    connectorName: identity.connectorName,
    model: identity.model,
    accountKey: identity.accountKey,
    target: "calendars/primary",
    op,
    sourceID: op === "update" ? identity.sourceID : null,
    deterministicEventID: `local-${key.operationID}`,
    payloadHash: payload,
    reissueIntent: op === "update"
      ? { kind: "conditional-update", ifMatch: etag }
      : reconcile ? { kind: "reconcile" } : { kind: "deterministic-create", providerID: identity.sourceID },
    providerEtag: op === "update" ? etag : null,
    documentID,
    ...(leaseMs === undefined ? {} : { leaseMs })
  }))

/** The HTTP statuses a provider answers with, by what they prove. */
export const HTTP_STATUSES = {
  /** Not applied, and never will be: a permanent failure. */
  permanent: [400, 403, 404, 409, 410, 412, 422],
  /** Not applied; try again (with the Retry-After of a 429). */
  refusedForNow: [429],
  /** May have been applied: the operation is in doubt. */
  inDoubt: [500, 502, 503, 504],
  /** The grant expired. */
  auth: [401]
} as const

/** A failure kind with an HTTP status that fits it (or none: a timeout, no network). */
export const failureWithStatus = (): fc.Arbitrary<{ readonly kind: FailureKind; readonly httpStatus: number | null }> =>
  fc.oneof(
    fc.constantFrom(...HTTP_STATUSES.permanent).map((httpStatus) => ({ kind: "permanent" as const, httpStatus })),
    fc.constantFrom<number | null>(...HTTP_STATUSES.refusedForNow, ...HTTP_STATUSES.inDoubt, null).map((httpStatus) => ({ kind: "retryable" as const, httpStatus })),
    fc.constantFrom<number | null>(409, 412, null).map((httpStatus) => ({ kind: "unknown" as const, httpStatus })),
    fc.constant({ kind: "auth" as const, httpStatus: 401 }),
    fc.constant({ kind: "offline" as const, httpStatus: null })
  )

/** A time near `now`: exactly now, a millisecond either side, or further out (the edges a lease or a due time meets). */
export const timeAround = (now: Millis): fc.Arbitrary<Millis> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(now, now - 1, now + 1) },
    { weight: 1, arbitrary: fc.integer({ min: -120_000, max: 120_000 }).map((d) => now + d) }
  )

/** Two times that are often equal (ties), else ordered either way. */
export const timePair = (now: Millis): fc.Arbitrary<readonly [Millis, Millis]> =>
  fc.oneof(timeAround(now).map((t) => [t, t] as const), fc.tuple(timeAround(now), timeAround(now)))

/** A `recordAttemptFailure` input under `leaseToken`, its `retryAt` at the edges around `now`. */
export const attemptFailure = (leaseToken: string, now: Millis): fc.Arbitrary<AttemptFailure> =>
  fc.record({
    failure: failureWithStatus(),
    notApplied: fc.option(fc.boolean(), { nil: undefined }),
    retryAt: fc.option(timeAround(now), { nil: undefined })
  }).map(({ failure, notApplied, retryAt }) => ({
    leaseToken,
    ...failure,
    ...(notApplied === undefined ? {} : { notApplied }),
    ...(retryAt === undefined ? {} : { retryAt })
  }))

/** A `finalizeOperationAndArmWatch` input under `leaseToken`, its watch due at the edges around `now`. */
export const finalizeInput = (leaseToken: string, now: Millis): fc.Arbitrary<FinalizeOperationInput> =>
  fc.record({
    sourceID: pooledID("evt", 4),
    documentID: pooledID("doc", 3),
    providerEtag: fc.option(pooledID("etag", 3), { nil: null }),
    watchDueAt: timeAround(now)
  }).map((input) => ({ leaseToken, ...input, resultEntity: { id: input.sourceID, etag: input.providerEtag } }))

/** A `recordVerification` input for `generation`, its fetched digest often the winner `winner`. */
export const verificationInput = (generation: number, now: Millis, winner: string | null = "digest-1"): fc.Arbitrary<VerificationInput> =>
  fc.record({
    fetchedDigest: fc.constantFrom<string | null>(winner, "digest-other", null),
    maxAttempts: fc.integer({ min: 1, max: 5 }),
    dueAt: timeAround(now),
    claimedUntil: fc.option(timeAround(now), { nil: null })
  }).map((input) => ({ generation, ...input }))

/** A `deferWatch` input for `generation` under the claim `claimedUntil`. */
export const deferInput = (generation: number, claimedUntil: Millis, now: Millis): fc.Arbitrary<DeferInput> =>
  fc.record({ nextAttemptAt: timeAround(now), reason: fc.constantFrom<DeferInput["reason"]>("offline", "auth", null, undefined) })
    .map(({ nextAttemptAt, reason }) => ({ generation, claimedUntil, nextAttemptAt, ...(reason === undefined ? {} : { reason }) }))

/** A request fate: `ok` most of the time, else any of `fates` (every fate by default). */
export const requestFate = (fates: ReadonlyArray<RequestFate> = REQUEST_FATES): fc.Arbitrary<RequestFate> => {
  const others = fates.filter((f) => f !== "ok")
  return others.length === 0
    ? fc.constant("ok")
    : fc.oneof({ weight: 3, arbitrary: fc.constant<RequestFate>("ok") }, { weight: 2, arbitrary: fc.constantFrom(...others) })
}
