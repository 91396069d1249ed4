import type { ClaimOperationInput, ConnectorOperation, ProjectionWatch } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import {
  type EndState,
  FakeProvider,
  judgeClaim,
  judgeEnd,
  judgeRelistDeletion,
  judgeRetention,
  keepRuleLets,
  keyOf,
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

  it("name a relist deletion of a document the provider still has, or one written since the run started", () => {
    const deletion = { actor: "relist1", runID: "run-12345678", sourceID: "evt-1", documentID: "doc-1", liveEntities: [], writtenSinceRunStarted: false }
    expect(judgeRelistDeletion(deletion)).toEqual([])
    expect(judgeRelistDeletion({ ...deletion, liveEntities: ["evt-2"] })).toEqual([expect.objectContaining({ detail: expect.stringContaining("the provider has evt-2 written from it") })])
    expect(names(judgeRelistDeletion({ ...deletion, writtenSinceRunStarted: true }))).toEqual(["relist-deletes-only-dead-documents"])
  })
})
