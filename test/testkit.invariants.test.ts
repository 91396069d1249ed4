import type { ClaimOperationInput, ConnectorOperation, ProjectionWatch } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import {
  Crash,
  type EndState,
  FakeProvider,
  judgeClaim,
  judgeEnd,
  judgeLeasesWhilePaused,
  judgeLeasesWithinCap,
  judgePauseScopes,
  judgeRejection,
  judgeRelistDeletion,
  judgeRetention,
  judgeWriteBackEnd,
  keepRuleLets,
  keyOf,
  type LimitHistory,
  missedBySweep,
  type SeenLease,
  watchGenerationKey
} from "@connector-store/testkit"
import { describe, expect, it } from "vitest"

const START = 1_700_000_000_000
const CALLER = "did:example:device"

const edit = (operationID: string): ClaimOperationInput & { readonly documentID: string } => ({
  callerDID: CALLER,
  operationID,
  ownerDID: "did:example:owner",
  connectorName: "calendar",
  model: "Event",
  op: "update",
  accountKey: "owner@example.com",
  target: "calendars/primary",
  sourceID: "evt-1",
  deterministicEventID: `evt-1-${operationID}`,
  payloadHash: `v-${operationID}`,
  reissueIntent: { kind: "conditional-update", ifMatch: "etag-1" },
  providerEtag: "etag-1",
  documentID: "doc-1"
})

/** Two write-backs of doc-1 committed through a real memory store and the provider, one second apart: the end of a clean run. */
const cleanRun = async () => {
  const clock = { now: START }
  const winner = { digest: "v-op-2" }
  const store = openMemoryConnectorStore({ now: () => clock.now, readWinner: async () => winner.digest })
  const provider = new FakeProvider()
  provider.seed("evt-1", "v0", "doc-1")
  const client = provider.client("runner1")
  try {
    for (const id of ["op-1", "op-2"]) {
      const input = edit(id)
      const claim = await store.claimOperation(input)
      if (claim.outcome !== "claimed") throw new Error(`claim of ${id}: ${claim.outcome}`)
      const leaseToken = claim.lease.token
      await store.markOperationSent(input, { leaseToken })
      const entity = await client.update(input)
      await store.finalizeOperationAndArmWatch(input, {
        leaseToken, sourceID: entity.id, documentID: input.documentID, providerEtag: entity.etag, resultEntity: entity, watchDueAt: clock.now + 200
      })
      clock.now += 1_000
    }
    for (const w of (await store.listDueOperations(clock.now)).watches) {
      const identity = { ownerDID: w.ownerDID, connectorName: w.connectorName, model: w.model, accountKey: w.accountKey, sourceID: w.sourceID }
      const until = clock.now + 1_000
      if (!(await store.claimWatchAttempt(identity, { generation: w.repairGeneration, until, now: clock.now }))) throw new Error("watch not claimed")
      const fetched = await client.get(w.sourceID)
      await store.recordVerification(identity, { generation: w.repairGeneration, claimedUntil: until, fetchedDigest: fetched?.digest ?? null, maxAttempts: 3, dueAt: clock.now + 200 })
    }
    const rows = (await store.listOperations({ limit: 10 })).items
    const watches = (await store.listWatches({ limit: 10 })).items
    const state: EndState = { provider, rows, watches, knownKeys: rows.map(keyOf), collected: new Set(), startedOver: new Set(), winnerOf: () => winner.digest }
    return { state, provider, client, rows, watches, now: clock.now }
  } finally {
    await store.close()
  }
}

const row = (rows: ReadonlyArray<ConnectorOperation>, operationID: string) => rows.find((r) => r.operationID === operationID)!
const names = (violations: ReadonlyArray<{ readonly invariant: string }>) => violations.map((v) => v.invariant)

describe("the testkit's end-state judges", () => {
  it("find nothing wrong with a clean run", async () => {
    const { state, rows, watches } = await cleanRun()
    expect(rows.map((r) => r.state)).toEqual(["committed", "committed"])
    expect(watches.map((w) => w.verificationStatus)).toEqual(["verified"])
    expect(judgeEnd(state)).toEqual([])
  })

  it("judge double apply by the provider's own check, except for a key that started over", async () => {
    const { state, provider, client } = await cleanRun()
    await client.update(edit("op-1")) // a blind re-send that applies again
    expect(judgeEnd(state)).toEqual(provider.check())
    expect(names(judgeEnd(state))).toEqual(["no-double-apply"])
    expect(judgeEnd({ ...state, startedOver: new Set([`${CALLER}/op-1`]) })).toEqual([])
  })

  it("name a lost key, and a commit the provider never saw, unless retention removed it or it started over", async () => {
    const { state, rows } = await cleanRun()
    const lost = { ...state, knownKeys: [...state.knownKeys, `${CALLER}/op-3`] }
    expect(judgeEnd(lost)).toEqual([{ invariant: "nothing-lost", detail: `${CALLER}/op-3 has no row, and no retention call removed it` }])
    expect(judgeEnd({ ...lost, collected: new Set([`${CALLER}/op-3`]) })).toEqual([])
    const unseen = { ...row(rows, "op-2"), operationID: "op-9" }
    const committedUnseen = { ...state, rows: [...rows, unseen] }
    expect(judgeEnd(committedUnseen)).toEqual([expect.objectContaining({ invariant: "nothing-lost", detail: expect.stringContaining("the provider never applied") })])
    expect(judgeEnd({ ...committedUnseen, startedOver: new Set([`${CALLER}/op-9`]) })).toEqual([])
  })

  it("name a stuck row, one the due sweep missed, and a dead row the provider applied (unless in doubt)", async () => {
    const { state, rows } = await cleanRun()
    const with1 = (r: ConnectorOperation) => [r, row(rows, "op-2")]
    expect(names(judgeEnd({ ...state, rows: with1({ ...row(rows, "op-1"), state: "attempted" }) }))).toEqual(["nothing-stuck"])
    expect(names(judgeEnd({ ...state, missedBySweep: [`${CALLER}/op-1`] }))).toEqual(["nothing-stuck"])
    const dead = { ...row(rows, "op-1"), state: "dead" as const, inDoubtSince: null }
    expect(names(judgeEnd({ ...state, rows: with1(dead) }))).toEqual(["no-failed-that-applied"])
    expect(judgeEnd({ ...state, rows: with1({ ...dead, inDoubtSince: START }) })).toEqual([])
  })

  it("name a committed write-back without its watch, unless its document is gone", async () => {
    const { state } = await cleanRun()
    expect(names(judgeEnd({ ...state, watches: [] }))).toEqual(["committed-has-watch", "committed-has-watch"])
    expect(judgeEnd({ ...state, watches: [], winnerOf: () => null })).toEqual([])
  })

  it("let a committed write-back's watch go once a delete of its document committed after it, and not before", async () => {
    const { state, rows } = await cleanRun()
    const deleted = { ...row(rows, "op-2"), operationID: "op-d", op: "delete" as const, reissueIntent: { kind: "idempotent-delete" } }
    const order = (d: number) => (key: string) => key === `${CALLER}/op-d` ? d : key === `${CALLER}/op-2` ? 2 : 1
    const gone = { ...state, provider: { ledger: state.provider.ledger, check: state.provider.check.bind(state.provider), entities: new Map() }, rows: [...rows, deleted], watches: [] }
    expect(judgeEnd({ ...gone, committedAt: order(3) })).toEqual([])
    expect(names(judgeEnd({ ...gone, committedAt: order(0) }))).toEqual(["committed-has-watch", "committed-has-watch"])
  })

  it("judge a committed delete by its entity gone and its watch retired, not by a request it applied", async () => {
    const { state, rows } = await cleanRun()
    const deleted = { ...row(rows, "op-2"), operationID: "op-d", op: "delete" as const, reissueIntent: { kind: "reconcile" } }
    const withDelete = { ...state, rows: [...rows, deleted], committedAt: (key: string) => key === `${CALLER}/op-d` ? 3 : 1 }
    expect(judgeEnd(withDelete)).toEqual([
      { invariant: "delete-removed", detail: `${CALLER}/op-d is a committed delete of evt-1, but the provider still has evt-1: it was finalized without being applied` },
      { invariant: "delete-removed", detail: `${CALLER}/op-d is a committed delete of evt-1, but its watch (g1, doc-1) is still there` }
    ])
    // The entity a delete was asked to delete is judged, not the one it was finalized with.
    const elsewhere = { ...withDelete, deleteTargetOf: () => "evt-9" }
    expect(judgeEnd(elsewhere)).toEqual([])
  })

  it("take a 404 or 410 of an idempotent delete as applied when the delete reads failed, and of a reconcile delete not", async () => {
    const { state, rows } = await cleanRun()
    const provider = new FakeProvider()
    const del = { callerDID: CALLER, operationID: "op-d", sourceID: "evt-gone", documentID: "doc-1", payloadHash: "v-d" }
    await provider.client("runner1").delete(del).catch(() => undefined) // 404: the entity is gone
    const dead = { ...row(rows, "op-2"), operationID: "op-d", op: "delete" as const, state: "dead" as const, inDoubtSince: null, reissueIntent: { kind: "idempotent-delete" } }
    const end = { ...state, provider, rows: [dead], watches: [], knownKeys: [] }
    expect(judgeWriteBackEnd(end)).toEqual([{ invariant: "no-failed-that-applied", detail: `${CALLER}/op-d is dead and not in doubt, but the provider deleted its entity or answered it gone (request #1)` }])
    expect(judgeWriteBackEnd({ ...end, rows: [{ ...dead, reissueIntent: { kind: "reconcile" } }] })).toEqual([])
  })

  it("name the lapsed, due attempted rows the due sweep did not list", async () => {
    const { rows, now } = await cleanRun()
    const attempted = { ...row(rows, "op-1"), state: "attempted" as const, leaseExpiresAt: now - 1, nextAttemptAt: null }
    expect(missedBySweep([attempted, row(rows, "op-2")], new Set(), now)).toEqual([`${CALLER}/op-1`])
    expect(missedBySweep([attempted], new Set([`${CALLER}/op-1`]), now)).toEqual([])
    expect(missedBySweep([{ ...attempted, leaseExpiresAt: now + 1 }], new Set(), now)).toEqual([])
    expect(missedBySweep([{ ...attempted, nextAttemptAt: now + 1 }], new Set(), now)).toEqual([])
  })

  it("tell a pending watch never due from one merely still pending", async () => {
    const { state, watches } = await cleanRun()
    const pending: ProjectionWatch = { ...watches[0]!, verificationStatus: "pending_verification", nextAttemptAt: null }
    expect(names(judgeEnd({ ...state, watches: [pending] }))).toEqual(["no-pending-watch-never-due"])
    expect(names(judgeEnd({ ...state, watches: [{ ...pending, nextAttemptAt: START }] }))).toEqual(["nothing-stuck"])
  })

  it("name a give-up that swallowed an ingress winner no verification was claimed against", async () => {
    const { state, watches } = await cleanRun()
    const gaveUp: ProjectionWatch = { ...watches[0]!, verificationStatus: "repair_failed", observedWinnerDigest: "ingress:1" }
    const swallowed = { ...state, watches: [gaveUp], ingressWinners: new Map([["doc-1", new Set(["ingress:1"])]]), winnerOf: () => "ingress:1" }
    expect(names(judgeEnd(swallowed))).toEqual(["no-give-up-swallows-a-later-winner"])
    expect(judgeEnd({ ...swallowed, claimedAgainst: new Map([[watchGenerationKey(gaveUp), new Set(["ingress:1"])]]) })).toEqual([])
    expect(judgeEnd({ ...swallowed, winnerOf: () => "local:2" })).toEqual([])
  })
})

describe("the testkit's retention judges", () => {
  it("let an older committed row go once newer committed rows of its caller and owner exist, and keep the newest", async () => {
    const { rows, now } = await cleanRun()
    expect(keepRuleLets(row(rows, "op-1"), rows, now, now)).toBe(true)
    expect(keepRuleLets(row(rows, "op-2"), rows, now, now)).toBe(false)
    expect(keepRuleLets(row(rows, "op-1"), rows, row(rows, "op-1").updatedAt, now)).toBe(false)
    expect(keepRuleLets(row(rows, "op-1"), [row(rows, "op-1")], now, now)).toBe(false)
  })

  it("judge a retention call by what it removed", async () => {
    const { rows, now } = await cleanRun()
    const call = { call: "collect #1", rowsBefore: rows, before: now, now }
    expect(judgeRetention({ ...call, rowsAfter: [row(rows, "op-2")] })).toEqual({ removed: [`${CALLER}/op-1`], violations: [] })
    expect(judgeRetention({ ...call, rowsAfter: [row(rows, "op-1")] })).toEqual({
      removed: [`${CALLER}/op-2`],
      violations: [expect.objectContaining({ invariant: "retention-keeps", detail: expect.stringContaining("which the keep rule keeps") })]
    })
    const revived = { ...row(rows, "op-1"), state: "attempted" as const, version: row(rows, "op-1").version + 1 }
    expect(judgeRetention({ ...call, rowsAfter: [row(rows, "op-2")], latestSeen: (k) => k === `${CALLER}/op-1` ? revived : undefined }).violations)
      .toEqual([expect.objectContaining({ invariant: "retention-keeps", detail: expect.stringContaining("last seen attempted") })])
  })
})

describe("the testkit's judges of a moment", () => {
  it("name a claim granted without a reissue after a request of its key applied", () => {
    const claim = { actor: "runner2", key: `${CALLER}/op-1`, reissue: null, landedAtGrant: true, applied: true, startedOver: false }
    expect(judgeClaim(claim)).toEqual([{ invariant: "no-blind-claim", detail: `runner2's claim of ${CALLER}/op-1 answered reissue: null, but an earlier request of it was applied` }])
    expect(judgeClaim({ ...claim, reissue: { kind: "conditional-update", ifMatch: "etag-2" } })).toEqual([])
    expect(judgeClaim({ ...claim, landedAtGrant: false })).toEqual([])
    expect(judgeClaim({ ...claim, startedOver: true })).toEqual([])
  })

  it("name a rejection that is neither one of the store's errors nor a simulated crash", () => {
    expect(judgeRejection("runner1: claimOperation", new TypeError("boom"))).toEqual([
      { invariant: "typed-rejections", detail: expect.stringMatching(/^runner1: claimOperation rejected with .*boom/) }
    ])
    expect(judgeRejection("runner1: claimOperation", { _tag: "PersistenceError" })).toEqual([])
    expect(judgeRejection("runner1: claimOperation", { _tag: "NotAStoreError" })).toHaveLength(1)
    expect(judgeRejection("runner1", new Crash("runner1", "after:claimOperation"))).toEqual([])
  })

  it("name a relist deletion of a document the provider still has, or one written since the run started", () => {
    const deletion = { actor: "relist1", runID: "run-12345678", sourceID: "evt-1", documentID: "doc-1", liveEntities: [], writtenSinceRunStarted: false }
    expect(judgeRelistDeletion(deletion)).toEqual([])
    expect(judgeRelistDeletion({ ...deletion, liveEntities: ["evt-2"] })).toEqual([expect.objectContaining({ detail: expect.stringContaining("the provider has evt-2 written from it") })])
    expect(names(judgeRelistDeletion({ ...deletion, writtenSinceRunStarted: true }))).toEqual(["relist-deletes-only-dead-documents"])
  })
})

describe("the testkit's provider limit judges", () => {
  const ada = { connectorName: "calendar", accountKey: "ada@example.com" }
  const lease = (key: string, from: number, grantedAt = START): SeenLease =>
    ({ actor: `runner-${key}`, key, ...ada, grantedAt, expiresAt: grantedAt + 1_000, span: { from, to: from + 1 } })
  const history = (h: Partial<LimitHistory>): LimitHistory => ({ leases: [], releases: [], limits: [], refusals: [], ...h })
  const capOne = { kind: "cap" as const, scope: ada, maxInFlight: 1, span: { from: 1, to: 2 } }

  it("name a lease granted while the scope's cap was taken by a lease surely live then", () => {
    const full = history({ limits: [capOne], leases: [lease("a", 3), lease("b", 5, START + 500)] })
    expect(judgeLeasesWithinCap(full)).toEqual([{
      invariant: "leases-within-cap",
      detail: `runner-b was granted b in calendar/ada@example.com (maxInFlight 1) at ${START + 500} while a (runner-a, until ${START + 1_000}) held live leases there`
    }])
    expect(judgeLeasesWithinCap({ ...full, leases: [lease("a", 3), lease("b", 5, START + 1_000)] }), "a lapsed").toEqual([])
    expect(judgeLeasesWithinCap({ ...full, releases: [{ key: "a", span: { from: 4, to: 7 } }] }), "a may have been released first").toEqual([])
    expect(judgeLeasesWithinCap({ ...full, leases: [...full.leases, lease("a", 4)] }), "a may have been leased again first").toEqual([])
    expect(judgeLeasesWithinCap({ ...full, limits: [capOne, { ...capOne, maxInFlight: null, span: { from: 5, to: 7 } }] }), "the cap may have been cleared").toEqual([])
    expect(judgeLeasesWithinCap({ ...full, limits: [{ ...capOne, scope: { connectorName: "calendar" }, maxInFlight: 2 }] }), "the connector's cap has room").toEqual([])
    expect(names(judgeLeasesWithinCap({ ...full, leases: [lease("a", 3), lease("b", 3)] })), "one batch claim's leases count each other")
      .toEqual(["leases-within-cap", "leases-within-cap"])
  })

  it("name a lease granted while its account or connector was surely paused", () => {
    const pause = { kind: "pause" as const, scope: { connectorName: "calendar" }, until: START + 500, by: "runner-x's 429", span: { from: 1, to: 2 } }
    const paused = history({ limits: [pause], leases: [lease("a", 3)] })
    expect(judgeLeasesWhilePaused(paused)).toEqual([{
      invariant: "no-lease-while-paused",
      detail: `runner-a was granted a at ${START}, while calendar was paused until ${START + 500} by runner-x's 429`
    }])
    expect(judgeLeasesWhilePaused({ ...paused, leases: [lease("a", 3, START + 500)] }), "a pause holds strictly before its end").toEqual([])
    expect(judgeLeasesWhilePaused({ ...paused, leases: [lease("a", 1)] }), "the pause may have landed after").toEqual([])
    expect(judgeLeasesWhilePaused({ ...paused, limits: [pause, { kind: "resume", scope: { connectorName: "calendar" }, span: { from: 2, to: 4 } }] }), "resumed").toEqual([])
    expect(judgeLeasesWhilePaused({ ...paused, limits: [{ ...pause, scope: { connectorName: "calendar", accountKey: "bob@example.com" } }] }), "another account").toEqual([])
  })

  it("name a claim refused for a pause no call or 429 of its own account or connector set", () => {
    const pause = { kind: "pause" as const, scope: ada, until: START + 500, by: "runner-x's 429", span: { from: 1, to: 2 } }
    const refusal = { actor: "runner-b", key: "b", ...ada, limitedBy: { scope: ada, reason: "paused" as const }, nextAttemptAt: START + 500, span: { from: 3, to: 4 } }
    expect(judgePauseScopes(history({ limits: [pause], refusals: [refusal] }))).toEqual([])
    expect(judgePauseScopes(history({ limits: [pause], refusals: [{ ...refusal, nextAttemptAt: START + 900 }] }))).toEqual([{
      invariant: "pause-stays-on-its-account",
      detail: `runner-b's claim of b (calendar/ada@example.com) was refused as calendar/ada@example.com paused until ${START + 900}, but no call or 429 paused it until then`
    }])
    const bob = { connectorName: "calendar", accountKey: "bob@example.com" }
    expect(judgePauseScopes(history({ limits: [pause], refusals: [{ ...refusal, ...bob }] })))
      .toEqual([expect.objectContaining({ detail: expect.stringContaining("neither its account nor its connector") })])
    expect(judgePauseScopes(history({ refusals: [{ ...refusal, limitedBy: { scope: ada, reason: "at-capacity" } }] }))).toEqual([])
  })
})
