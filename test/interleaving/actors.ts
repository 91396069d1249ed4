import type { ClaimOperationInput, ClaimResult, ConnectorOperation, ProjectionWatch, ProviderLimit, ProviderScope, SafeReissue } from "@connector-store/core"
import {
  type CallSpan,
  Crash,
  isTypedRejection,
  judgeClaim,
  judgeRejection,
  judgeRelistDeletion,
  judgeRetention,
  keyOf,
  watchGenerationKey,
  type WriteRequest
} from "@connector-store/testkit"
import { allOperations, CALLER, identityOf, type Knowledge, observe, SCOPE, START, type World, watchOf } from "./world.js"

/** Opens a store call's span on the run's events (`know.seq`); the function it answers closes it as the answer comes. */
const opened = (know: Knowledge): () => CallSpan => {
  const from = ++know.seq
  return () => ({ from, to: ++know.seq })
}

/** What a claim of `actor` answered, for the limit judges: a lease granted, a claim a limit refused, or an operation it finished. */
const seeClaim = (world: World, actor: string, claim: ClaimResult, span: CallSpan): void => {
  const { know, il } = world
  const { connectorName, accountKey } = claim.operation
  const key = keyOf(claim.operation)
  const at = `trace line ${il.trace.length + 1}`
  if (claim.outcome === "claimed") {
    know.limits.leases.push({ actor, key, connectorName, accountKey, grantedAt: claim.operation.updatedAt, expiresAt: claim.lease.expiresAt, span, at })
  } else if (claim.outcome === "scheduled" && claim.limitedBy !== undefined) {
    know.limits.refusals.push({ actor, key, connectorName, accountKey, limitedBy: claim.limitedBy, nextAttemptAt: claim.nextAttemptAt, span, at })
  } else if (claim.outcome === "finished") {
    know.limits.releases.push({ key, span })
  }
}

/**
 * Runs one actor to its end: a `Crash` stops it quietly (its lease lapses
 * later), a typed store rejection stops it too, an untyped one is a
 * violation. Never rejects.
 */
export const runActor = async (world: World, actor: string, body: () => Promise<void>): Promise<void> => {
  try {
    await body()
  } catch (error) {
    world.know.violations.push(...judgeRejection(actor, error))
  }
}

/** The claim input of a stored row (a re-drive brings the row's own fields, so the payload hash matches). */
export const claimInputOf = (row: ConnectorOperation): ClaimOperationInput => ({
  callerDID: row.callerDID,
  operationID: row.operationID,
  ownerDID: row.ownerDID,
  connectorName: row.connectorName,
  model: row.model,
  op: row.op,
  accountKey: row.accountKey,
  target: row.target,
  sourceID: row.sourceID,
  deterministicEventID: row.deterministicEventID,
  payloadHash: row.payloadHash,
  reissueIntent: row.reissueIntent as ClaimOperationInput["reissueIntent"],
  providerEtag: row.providerEtag,
  documentID: row.documentID
})

/**
 * The request a run may send. Without a reissue a first request goes out
 * plainly (an update without If-Match, a reconcile-only create without an
 * id), as a client that trusts the store would, so a blind claim becomes a
 * real second application at the provider. With one: exactly what it says.
 */
export const requestFor = (world: World, input: ClaimOperationInput, reissue: SafeReissue | null): WriteRequest => {
  const digest = input.payloadHash
  const base = { key: keyOf(input), documentID: input.documentID!, digest }
  const used = world.flavour.ignoresReissue ? null : reissue
  if (used?.kind === "conditional-update") return { ...base, op: "update", entityID: input.sourceID!, ifMatch: used.ifMatch, reissue: used.kind }
  if (used?.kind === "deterministic-create") return { ...base, op: "create", providerID: used.providerID, reissue: used.kind }
  if (input.op === "update") return { ...base, op: "update", entityID: input.sourceID!, reissue: null }
  const intent = input.reissueIntent as { readonly kind: string; readonly providerID?: string }
  return intent.kind === "deterministic-create"
    ? { ...base, op: "create", providerID: intent.providerID!, reissue: null }
    : { ...base, op: "create", reissue: null }
}

/**
 * One drive of one operation, as the operations guide prescribes: claim →
 * mark sent → one request, sent only as the claim's reissue allows →
 * finalize, or the failure its answer calls for (a 409/412 looks the key up
 * and finalizes when an earlier request landed; the run in doubt does the
 * same after a timeout). Checks "no blind claim" on every granted claim.
 */
export const drive = async (world: World, actor: string, input: ClaimOperationInput): Promise<string> => {
  const { store, il, provider, know } = world
  const key = { callerDID: input.callerDID, operationID: input.operationID }
  const k = keyOf(key)
  // Judged as the store answered, not when this actor resumes: a request sent in between, by whoever took the key over, came after the grant.
  let landedAtGrant = false
  const claim = await il.call(actor, `claim ${k}`, async () => {
    const span = opened(know)
    const answered = await store.claimOperation(input)
    landedAtGrant = provider.possiblyLanded(k)
    seeClaim(world, actor, answered, span())
    return answered
  })
  know.knownKeys.add(k)
  if (claim.outcome === "claimed" && claim.created && know.collected.has(k)) {
    // A key replayed after retention collected its row is outside its idempotency window: it starts over as a new key.
    know.collected.delete(k)
    know.latestRow.delete(k)
    know.replayedAfterRetention.add(k)
    il.note(`${k} replayed after retention collected it: a new operation (outside its idempotency window)`)
  }
  observe(know, claim.operation)
  if (claim.outcome !== "claimed") return claim.outcome
  return driveClaimed(world, actor, input, claim, landedAtGrant)
}

/**
 * Runs `send` (a mark and its request) counted in `know.sending` for `k`:
 * until the provider has the request, no one else can see it coming, so an
 * operator must not take a lookup's "not applied" for an outcome.
 */
const whileSending = async <A>(know: Knowledge, k: string, send: () => Promise<A>): Promise<A> => {
  know.sending.set(k, (know.sending.get(k) ?? 0) + 1)
  try {
    return await send()
  } finally {
    const left = know.sending.get(k)! - 1
    if (left === 0) know.sending.delete(k)
    else know.sending.set(k, left)
  }
}

/**
 * Drives an operation this actor was granted (`claim`, by a claim of its key
 * or a batch claim) from the send marker on. `landedAtGrant`: whether a
 * request of the key may have landed when the store granted it.
 */
const driveClaimed = async (
  world: World,
  actor: string,
  input: ClaimOperationInput,
  claim: Extract<ClaimResult, { readonly outcome: "claimed" }>,
  landedAtGrant: boolean
): Promise<string> => {
  const { store, il, provider, know } = world
  const key = { callerDID: input.callerDID, operationID: input.operationID }
  const k = keyOf(key)
  know.violations.push(...judgeClaim({
    actor,
    key: k,
    reissue: claim.reissue,
    landedAtGrant,
    applied: provider.appliedOf(k).length > 0,
    startedOver: know.replayedAfterRetention.has(k),
    at: `trace line ${il.trace.length}`
  }))
  const leaseToken = claim.lease.token
  const fail = async (kind: "retryable" | "permanent" | "unknown" | "auth" | "offline", httpStatus?: number, retryAt?: number) => {
    const result = await il.call(actor, `fail ${k} ${kind}${httpStatus === undefined ? "" : ` ${httpStatus}`}`, async () => {
      const span = opened(know)
      const failed = await store.recordAttemptFailure(key, { leaseToken, kind, httpStatus: httpStatus ?? null, retryAt })
      if (failed.outcome === "lease-lost") return failed
      const at = span()
      know.limits.releases.push({ key: k, span: at })
      // A retryable 429 pauses the account until its Retry-After, when that is still ahead on the store's clock.
      if (kind === "retryable" && httpStatus === 429 && retryAt !== undefined && retryAt > failed.operation.updatedAt) {
        const scope = { connectorName: input.connectorName, accountKey: input.accountKey }
        know.limits.limits.push({ kind: "pause", scope, until: retryAt, by: `${actor}'s 429 on ${k}`, span: at })
      }
      return failed
    })
    observe(know, result.operation)
    return result.outcome
  }
  const finalize = async (sourceID: string, etag: string) => {
    const result = await il.call(actor, `finalize ${k} → ${sourceID}`, async () => {
      const span = opened(know)
      const finalized = await store.finalizeOperationAndArmWatch(key, {
        leaseToken,
        sourceID,
        documentID: input.documentID!,
        providerEtag: etag,
        resultEntity: { etag },
        watchDueAt: world.clock.now + 200
      })
      if (finalized.outcome !== "lease-lost") know.limits.releases.push({ key: k, span: span() })
      return finalized
    })
    observe(know, result.operation)
    if (result.outcome === "committed") {
      const doc = world.documents.get(input.documentID!)
      if (doc !== undefined) doc.source = sourceID
      know.lastCommit.set(input.documentID!, ++know.seq)
      il.note(`commit of ${k} on ${input.documentID} (event ${know.seq})`)
    }
    return `finalize:${result.outcome}`
  }
  const answer = await whileSending(know, k, async () => {
    const sent = await il.call(actor, `mark sent ${k}`, async () => {
      const span = opened(know)
      const marked = await store.markOperationSent(key, { leaseToken })
      if (marked.outcome === "exhausted") know.limits.releases.push({ key: k, span: span() })
      return marked
    })
    observe(know, sent.operation)
    return sent.outcome !== "sent" ? `mark:${sent.outcome}` : await provider.write(actor, requestFor(world, input, claim.reissue))
  })
  if (typeof answer === "string") return answer
  switch (answer.status) {
    case 200:
      return finalize(answer.entity.id, answer.entity.etag)
    case "timeout": {
      const outcome = await fail("retryable")
      if (outcome !== "reconcile_only") return outcome
      const found = await provider.lookup(actor, k)
      return found === null ? outcome : finalize(found.id, found.etag)
    }
    case 409:
    case 412: {
      const found = await provider.lookup(actor, k)
      if (found !== null) return finalize(found.id, found.etag)
      return fail("unknown", answer.status)
    }
    case 401:
      return fail("auth", 401, world.clock.now + 300)
    case 429:
      return fail("retryable", 429, world.clock.now + answer.retryAfterMs)
    case 400:
    case 404:
    case 410:
    case 422:
      return fail("permanent", answer.status)
    case "offline":
      return fail("offline")
    default:
      return fail("retryable", answer.status)
  }
}

/** A local edit and its write-back: the winner moves, then a new key is claimed and driven. */
export const writer = (world: World, actor: string, plan: ReadonlyArray<WritePlan>) => async () => {
  for (const [i, step] of plan.entries()) {
    const doc = world.documents.get(step.documentID)!
    if (doc.deleted) continue
    await world.il.point(actor, `edit ${doc.id}`)
    doc.rev++
    doc.winner = `${doc.id}@${doc.rev}`
    const current = world.provider.entities.get(doc.source)
    const creates = step.kind !== "update" || current === undefined
    const newSource = `${doc.id}-s${doc.rev}`
    const input: ClaimOperationInput = {
      callerDID: CALLER,
      operationID: `${actor}-${i}`,
      ...world.accountOf(doc.id),
      op: creates ? "create" : "update",
      target: "calendars/primary",
      sourceID: creates ? null : doc.source,
      deterministicEventID: `${doc.id}-${doc.rev}`,
      payloadHash: doc.winner,
      reissueIntent: creates
        ? step.kind === "create-reconcile" ? { kind: "reconcile" } : { kind: "deterministic-create", providerID: newSource }
        : { kind: "conditional-update", ifMatch: current!.etag },
      providerEtag: creates ? null : current!.etag,
      documentID: doc.id
    }
    world.il.note(`${actor} edits ${doc.id} → winner ${doc.winner}, ${input.op} as ${keyOf(input)}`)
    await drive(world, actor, input)
  }
}

/** One planned local edit: the document and how its write-back goes out. */
export interface WritePlan {
  readonly documentID: string
  readonly kind: "update" | "create-deterministic" | "create-reconcile"
}

/**
 * The verifier's step for one due watch: claim the attempt, fetch the
 * entity, record the verification. The winner current when the claim was
 * granted is remembered for "no give-up swallows a later winner".
 */
export const verify = async (world: World, actor: string, watch: ProjectionWatch): Promise<void> => {
  const { store, il, know } = world
  const identity = identityOf(watch)
  const now = world.clock.now
  const until = now + 1_000
  const claimed = await il.call(actor, `claim watch ${watch.sourceID} g${watch.repairGeneration}`, () =>
    store.claimWatchAttempt(identity, { generation: watch.repairGeneration, until, now }))
  if (!claimed) return
  const doc = world.documents.get(watch.documentID)
  if (doc !== undefined) {
    const g = watchGenerationKey(watch)
    know.claimedAgainst.set(g, new Set([...(know.claimedAgainst.get(g) ?? []), doc.winner]))
  }
  const flight = { documentID: watch.documentID }
  know.verifying.add(flight)
  let fetched
  try {
    fetched = await world.provider.get(actor, watch.sourceID)
  } catch (error) {
    know.verifying.delete(flight)
    throw error
  }
  try {
    await il.call(actor, `verify ${watch.sourceID} g${watch.repairGeneration} fetched ${fetched?.digest ?? "none"}`, () =>
      store.recordVerification(identity, {
        generation: watch.repairGeneration,
        claimedUntil: until,
        fetchedDigest: fetched?.digest ?? null,
        maxAttempts: world.verifyAttempts,
        dueAt: world.clock.now + 200
      }))
  } finally {
    know.verifying.delete(flight)
  }
}

/** A due sweep: lists what is due and drives each operation and verifies each watch. */
export const sweeper = (world: World, actor: string, rounds: number) => async () => {
  for (let r = 0; r < rounds; r++) {
    const due = await world.il.call(actor, "list due", () => world.store.listDueOperations(world.clock.now), (d) =>
      `${d.operations.map((o) => keyOf(o)).join(",") || "-"} | ${d.watches.map((w) => `${w.sourceID}g${w.repairGeneration}`).join(",") || "-"}`)
    for (const row of due.operations) await runOne(world, actor, () => drive(world, actor, claimInputOf(row)))
    for (const watch of due.watches) await runOne(world, actor, () => verify(world, actor, watch))
  }
}

/**
 * A batch worker: each round leases up to two due operations in one batch
 * claim and drives each one it was granted; what the batch ended instead
 * (out of attempts, or in doubt with no safe re-send) is observed as is.
 */
export const batcher = (world: World, actor: string, rounds: number) => async () => {
  for (let r = 0; r < rounds; r++) {
    let landed = new Set<string>()
    const batch = await world.il.call(actor, "claim due batch", async () => {
      const opening = opened(world.know)
      const answered = await world.store.claimDueOperations({ limit: 2 })
      landed = new Set(answered.claimed.map((claim) => keyOf(claim.operation)).filter((k) => world.provider.possiblyLanded(k)))
      const span = opening()
      for (const claim of [...answered.claimed, ...answered.finished.map((operation) => ({ outcome: "finished" as const, operation }))]) {
        seeClaim(world, actor, claim, span)
      }
      return answered
    }, (b) => `${b.claimed.map((c) => keyOf(c.operation)).join(",") || "-"} | finished ${b.finished.map((o) => keyOf(o)).join(",") || "-"}`)
    for (const row of batch.finished) observe(world.know, row)
    for (const claim of batch.claimed) {
      observe(world.know, claim.operation)
      const k = keyOf(claim.operation)
      await runOne(world, actor, () => driveClaimed(world, actor, claimInputOf(claim.operation), claim, landed.has(k)))
    }
  }
}

/** Runs one unit of an actor's work; a typed store rejection ends only that unit, a crash the actor. */
const runOne = async (world: World, actor: string, unit: () => Promise<unknown>): Promise<void> => {
  try {
    await unit()
  } catch (error) {
    if (error instanceof Crash || !isTypedRejection(error)) throw error
  }
}

/** An ingress: the entity is edited at the provider, the local copy adopts it, and the watch is armed for the new winner. */
export const ingress = (world: World, actor: string, documents: ReadonlyArray<string>) => async () => {
  for (const [i, id] of documents.entries()) {
    const doc = world.documents.get(id)!
    await world.il.point(actor, `provider-side edit of ${doc.source}`)
    const digest = `${actor}:${i}`
    const entity = world.provider.editElsewhere(doc.source, digest)
    if (entity === null || doc.deleted) continue
    world.il.note(`${doc.source} edited at the provider → ${digest}`)
    await world.il.point(actor, `ingest ${digest} into ${doc.id}`)
    while (world.ingressWaitsForVerifiers && [...world.know.verifying].some((f) => f.documentID === doc.id)) {
      await world.il.point(actor, `wait for the verification of ${doc.id}`)
    }
    doc.winner = digest
    world.know.ingressWinners.set(doc.id, new Set([...(world.know.ingressWinners.get(doc.id) ?? []), digest]))
    world.il.note(`winner of ${doc.id} → ${digest}`)
    await runOne(world, actor, () =>
      world.il.call(actor, `arm ingress ${doc.source} for ${digest}`, () =>
        world.store.armWatch(watchOf(doc.source), "ingress", { dueAt: world.clock.now, triggeringWinner: digest })))
  }
}

/** Someone deletes entities at the provider. */
export const deleter = (world: World, actor: string, documents: ReadonlyArray<string>) => async () => {
  for (const id of documents) {
    const doc = world.documents.get(id)!
    await world.il.point(actor, `provider-side delete of ${doc.source}`)
    if (world.provider.deleteElsewhere(doc.source)) world.il.note(`${doc.source} deleted at the provider`)
  }
}

/** True while a request of `k` may still reach the provider: one in flight, or a runner about to send one. */
const mayStillLand = ({ provider, know }: World, k: string): boolean => provider.inFlight(k) || know.sending.has(k)

/**
 * An operator: looks each unconfirmed operation up at the provider and
 * settles it (committed when it landed, dead when not; never one whose
 * request may still land, as a person waits out a lapsed lease and the
 * runners' request timeout first), retries dead ones, re-arms given-up watches.
 */
export const operator = (world: World, actor: string, rounds: number) => async () => {
  const { store, il, provider, know } = world
  for (let r = 0; r < rounds; r++) {
    const page = await il.call(actor, "list unconfirmed and dead", () => store.listOperations({ states: ["reconcile_only", "dead"], limit: 20 }), (p) =>
      p.items.map((o) => `${keyOf(o)}:${o.state}${o.inDoubtSince === null ? "" : "?"}`).join(",") || "-")
    for (const row of page.items) {
      observe(know, row)
      const k = keyOf(row)
      await runOne(world, actor, async () => {
        if (row.state === "reconcile_only" || row.inDoubtSince !== null) {
          if (mayStillLand(world, k)) return
          const found = await provider.lookup(actor, k)
          if (mayStillLand(world, k)) return
          const settled = await il.call(actor, `settle ${k} ${found === null ? "dead" : "committed"}`, async () => {
            const span = opened(know)
            const answered = await store.settleOperation(
              { callerDID: row.callerDID, operationID: row.operationID },
              found === null
                ? { outcome: "dead" }
                : { outcome: "committed", sourceID: found.id, documentID: row.documentID!, providerEtag: found.etag, watchDueAt: world.clock.now }
            )
            know.limits.releases.push({ key: k, span: span() })
            return answered
          }, (s) => `state ${s.operation.state}`)
          observe(know, settled.operation)
          if (settled.operation.state === "committed") know.lastCommit.set(row.documentID!, ++know.seq)
        } else {
          const retried = await il.call(actor, `retry ${k}`, async () => {
            const span = opened(know)
            const answered = await store.retryOperation({ callerDID: row.callerDID, operationID: row.operationID })
            know.limits.releases.push({ key: k, span: span() })
            return answered
          })
          observe(know, retried)
        }
      })
    }
    const failed = await il.call(actor, "list given-up watches", () => store.listWatches({ statuses: ["repair_failed"], limit: 20 }), (p) =>
      p.items.map((w) => w.sourceID).join(",") || "-")
    for (const watch of failed.items) {
      await runOne(world, actor, () => il.call(actor, `rearm ${watch.sourceID}`, () => store.rearmWatch(identityOf(watch), { dueAt: world.clock.now })))
    }
  }
}

/** A clock that steps forward and back. */
export const clockActor = (world: World, actor: string, steps: ReadonlyArray<number>) => async () => {
  for (const step of steps) {
    await world.il.point(actor, `step ${step > 0 ? "+" : ""}${step} ms`)
    world.clock.now += step
    world.il.note(`clock ${step > 0 ? "+" : ""}${step} ms`)
  }
}

/** Retention: collects finished operations older than now, judged against the keep rule on the rows around the call. */
export const retention = (world: World, actor: string, rounds: number) => async () => {
  const { store, il, know } = world
  for (let r = 0; r < rounds; r++) {
    const params = { before: world.clock.now, limit: 10 }
    const call = `collect #${r + 1} (before ${params.before - START})`
    let before: ReadonlyArray<ConnectorOperation> = []
    let after: ReadonlyArray<ConnectorOperation> = []
    // The rows are read right around the call, with no scheduling point between.
    await il.call(actor, call, async () => {
      before = await allOperations(store)
      const collected = await store.collectFinishedOperations(params)
      after = await allOperations(store)
      for (const row of before) observe(know, row)
      const judged = judgeRetention({
        call: `${actor} ${call}`,
        rowsBefore: before,
        rowsAfter: after,
        before: params.before,
        now: world.clock.now,
        latestSeen: (key) => know.latestRow.get(key)
      })
      for (const key of judged.removed) know.collected.set(key, `${actor} ${call}`)
      know.violations.push(...judged.violations)
      return collected
    })
    for (const row of after) observe(know, row)
  }
}

/**
 * A relist run over the scope: pages of the provider's listing committed as
 * checkpoints, then its deletion candidates decided `delete_local` and
 * applied (the local document deleted inside `applySweepCandidate`, under
 * the store's re-check), each application judged at the moment it happens: the provider must have no entity written from that
 * document, and no write-back of it may have committed since the run
 * started. With `applierConfirms`, the applier looks before deleting (the
 * candidate's source gone, no entity of the document left, no write-back of
 * it committed since the run started) and deletes under that check.
 */
export const relist = (world: World, actor: string, pageSize: number) => async () => {
  const { store, il, provider, know } = world
  let run = await il.call(actor, "checkpoint", () => store.getSweepCheckpoint(SCOPE))
  if (run === null || run.state === "complete") run = await il.call(actor, "start run", () => store.startRelistRun(SCOPE))
  if (!know.runStarted.has(run.runID)) {
    know.runStarted.set(run.runID, ++know.seq)
    il.note(`relist run ${run.runID.slice(0, 8)} started (event ${know.seq}, startedAt ${run.startedAt - START})`)
  }
  const runID = run.runID
  let page = run.pagesCommitted + 1
  let cursor = run.cursor
  for (;;) {
    const listed = await provider.list(actor, cursor, pageSize)
    const outcome = await il.call(actor, `commit page ${page}`, () =>
      store.commitSweepCheckpoint(runID, {
        page,
        cursor: listed.next,
        receipts: listed.items.map((e) => ({ sourceID: e.id, digest: e.digest })),
        complete: listed.next === null
      }))
    if (outcome === "stale-run" || outcome === "stale-page") return
    if (outcome === "completed") break
    page++
    cursor = listed.next
  }
  const candidates = await il.call(actor, "list candidates", () =>
    store.listSweepCandidates(runID, { limit: 50, maxDeletionFraction: 1 }), (cs) =>
    cs.map((c) => `${c.sourceID}:${c.kind}→${c.documentID}`).join(",") || "-")
  for (const c of candidates) {
    if (c.kind !== "deleted") continue
    const ref = { runID, sourceID: c.sourceID }
    const recorded = await il.call(actor, `decide delete_local ${c.sourceID}`, () => store.recordSweepOutcome(ref, "delete_local"))
    if (recorded !== "recorded") continue
    if (world.applierConfirms) {
      const gone = (await provider.get(actor, c.sourceID)) === null
      if (!gone || provider.liveDocuments().has(c.documentID)) {
        await il.call(actor, `keep ${c.sourceID}`, () => store.recordSweepOutcome(ref, "keep"))
        continue
      }
    }
    await il.point(actor, `delete document ${c.documentID}`)
    // The local deletion runs inside the store's transaction (applySweepCandidate), judged as it happens.
    let keep = false
    const applied = await il.call(actor, `apply ${c.sourceID}`, () =>
      store.applySweepCandidate(ref, () => {
        const writtenSince = (know.lastCommit.get(c.documentID) ?? 0) > (know.runStarted.get(runID) ?? Infinity)
        if (world.applierConfirms && (provider.liveDocuments().has(c.documentID) || writtenSince)) {
          // The confirming applier deletes under its own check: a write that landed since it looked stops it.
          keep = true
          throw new Error("keep")
        }
        know.violations.push(...judgeRelistDeletion({
          actor,
          runID,
          sourceID: c.sourceID,
          documentID: c.documentID,
          liveEntities: [...provider.entities.values()].filter((e) => e.documentID === c.documentID).map((e) => e.id),
          writtenSinceRunStarted: writtenSince
        }))
        const doc = world.documents.get(c.documentID)
        if (doc !== undefined) doc.deleted = true
        il.note(`document ${c.documentID} deleted locally`)
      })).catch((error: unknown) => {
        if (keep) return "kept" as const
        throw error
      })
    if (applied === "kept") await il.call(actor, `keep ${c.sourceID}`, () => store.recordSweepOutcome(ref, "keep"))
  }
}

/** A provider limit change: a scope's cap set (null: cleared), a pause of `ms` from the clock's now, or a pause lifted. */
export type LimitStep =
  | { readonly kind: "cap"; readonly scope: ProviderScope; readonly maxInFlight: number | null }
  | { readonly kind: "pause"; readonly scope: ProviderScope; readonly ms: number }
  | { readonly kind: "resume"; readonly scope: ProviderScope }

const scopeLabel = (scope: ProviderScope) => scope.accountKey === undefined ? scope.connectorName : `${scope.connectorName}/${scope.accountKey}`
const showLimit = (limit: ProviderLimit | null) =>
  limit === null ? "none" : `maxInFlight ${limit.maxInFlight ?? "none"}, paused until ${limit.pausedUntil === null ? "-" : limit.pausedUntil - START}`

/** Makes one limit change, recorded with its call's span for the limit judges. */
export const changeLimit = async (world: World, actor: string, step: LimitStep): Promise<void> => {
  const { store, il, know } = world
  const { scope } = step
  switch (step.kind) {
    case "cap":
      await il.call(actor, `cap ${scopeLabel(scope)} at ${step.maxInFlight ?? "none"}`, async () => {
        const span = opened(know)
        const limit = await store.setProviderLimit({ ...scope, maxInFlight: step.maxInFlight })
        know.limits.limits.push({ kind: "cap", scope, maxInFlight: step.maxInFlight, span: span() })
        return limit
      }, showLimit)
      return
    case "pause": {
      const until = world.clock.now + step.ms
      await il.call(actor, `pause ${scopeLabel(scope)} until ${until - START}`, async () => {
        const span = opened(know)
        const limit = await store.pauseProvider({ ...scope, until, status: 503 })
        know.limits.limits.push({ kind: "pause", scope, until, by: `${actor}'s pauseProvider`, span: span() })
        return limit
      }, showLimit)
      return
    }
    case "resume":
      await il.call(actor, `resume ${scopeLabel(scope)}`, async () => {
        const span = opened(know)
        const limit = await store.resumeProvider(scope)
        know.limits.limits.push({ kind: "resume", scope, span: span() })
        return limit
      }, showLimit)
  }
}

/** An operator of provider limits: sets and clears caps, pauses and resumes scopes while the runners work. */
export const limiter = (world: World, actor: string, steps: ReadonlyArray<LimitStep>) => async () => {
  for (const step of steps) await runOne(world, actor, () => changeLimit(world, actor, step))
}
