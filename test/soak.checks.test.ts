// The soak's verdict and its runner rules, on hand-made facts: each check
// finds what it must and nothing else, a re-drive never sends blind when the
// claim names a reissue, and a rejection is classified by its tag.
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { failed, judge, type LedgerEntry, readLines, type RunFacts } from "../soak/checks.mjs"
import { Aborted, requestFor, send, storeCall } from "../soak/drive.mjs"
import { parseArgs } from "../soak/options.mjs"
import { isInvalidPayload, startProvider } from "../soak/provider.mjs"

// Ledger lines as the provider writes them: the testkit model's entries (`n` in the order they
// left, `appliedAs` in the order they applied) with the soak's own fields.
let serial = 0
const request = (key: string, status: LedgerEntry["status"], applied: boolean, extra: { readonly reissue?: LedgerEntry["request"]["reissue"] } = {}): LedgerEntry => {
  const n = ++serial
  return {
    n, request: { key, op: "update", entityID: `ent-${key}`, reissue: extra.reissue ?? null }, fate: "ok", actor: "w1",
    arrival: "arrived", applied, alreadyGone: false, status, late: false, ...(applied ? { appliedAs: n } : {}), t: 1_000, token: `tok-${key}`
  }
}
const row = (key: string, state: string) => ({ operation_id: key, document_id: `doc-${key}`, state })

const clean: RunFacts = {
  ledger: [request("a", 200, true), request("b", 502, true), request("b", 412, false, { reissue: "conditional-update" })],
  events: [{ type: "claim-intent", key: "a" }, { type: "claim-answer", key: "a" }, { type: "claim-answer", key: "b" }],
  rows: [row("a", "committed"), row("b", "committed")],
  missedBySweep: [],
  unsettled: [],
  writeStates: new Map([["doc-a", "committed"], ["doc-b", "committed"]]),
  integrity: "ok"
}

describe("judge", () => {
  it("finds nothing in a clean run: a refused conditional re-send (412) or a taken id (409) is no second application", () => {
    const verdict = judge({ ...clean, ledger: [...clean.ledger, request("a", 409, false, { reissue: "deterministic-create" })] })
    expect(verdict.violations).toEqual({ duplicates: [], lost: [], stuck: [], misreported: [], untyped: [], busy: [], integrity: [], failover: [] })
    expect(failed(verdict)).toBe(false)
  })

  it("counts a key the provider applied twice as a duplicate, with the model's verdict and its requests", () => {
    const verdict = judge({ ...clean, ledger: [...clean.ledger, request("a", 200, true, { reissue: null })] })
    expect(verdict.violations.duplicates).toEqual(["a"])
    expect(verdict.details["a"]).toHaveLength(3)
    expect(verdict.details["a"]![0]).toMatch(/^a applied 2 times by requests that were not sanctioned reissues/)
    expect(failed(verdict)).toBe(true)
  })

  it("counts a reissue that applied on top of an earlier apply as a duplicate (a re-send that dropped its If-Match)", () => {
    const verdict = judge({ ...clean, ledger: [...clean.ledger, request("a", 200, true, { reissue: "conditional-update" })] })
    expect(verdict.violations.duplicates).toEqual(["a"])
    expect(verdict.details["a"]![0]).toMatch(/^a applied again by the sanctioned reissue #\d+ update by w1 \(conditional-update\), on top of #\d+/)
  })

  it("counts as lost a key a claim answered or the provider saw without a row, not one whose claim never answered", () => {
    const verdict = judge({
      ...clean,
      ledger: [...clean.ledger, request("seen", 503, false)],
      events: [...clean.events, { type: "claim-answer", key: "answered" }, { type: "claim-intent", key: "died-in-claim" }]
    })
    expect(verdict.violations.lost).toEqual(["answered", "seen"])
  })

  it("reports the keys the sweep missed and those recovery could not settle, once each", () => {
    const verdict = judge({ ...clean, missedBySweep: ["x", "y"], unsettled: ["y", "z"] })
    expect(verdict.violations.stuck).toEqual(["x", "y", "z"])
  })

  it("flags a write state that says failed though the write landed, or committed though it never did", () => {
    const verdict = judge({
      ...clean,
      ledger: [request("a", 200, true), request("b", 503, false), request("c", 502, true)],
      rows: [row("a", "dead"), row("b", "committed"), row("c", "reconcile_only")],
      writeStates: new Map([["doc-a", "failed"], ["doc-b", "committed"], ["doc-c", "unconfirmed"]])
    })
    expect(verdict.violations.misreported).toEqual(["a (failed, but applied)", "b (committed, never applied)"])
  })

  it("collects untyped rejections and SQLITE_BUSY from the workers' events, and a failed integrity check", () => {
    const verdict = judge({
      ...clean,
      events: [
        ...clean.events,
        { type: "violation", what: "untyped", worker: "w1", method: "claimOperation", text: "TypeError" },
        { type: "violation", what: "busy", worker: "w2", method: "markOperationSent", text: "SQLITE_BUSY" },
        { type: "typed-error", tag: "ConcurrentUpdateExhausted", method: "claimOperation" }
      ],
      integrity: "row 3 missing from index"
    })
    expect(verdict.violations.untyped).toEqual(["worker w1 claimOperation: TypeError"])
    expect(verdict.violations.busy).toEqual(["worker w2 markOperationSent: SQLITE_BUSY"])
    expect(verdict.violations.integrity).toEqual(["row 3 missing from index"])
    expect(judge({ ...clean, integrity: null }).violations.integrity).toEqual([])
  })
})

describe("judge, after a failover", () => {
  // Keys acknowledged before the crash (t 1 000) at 5 000: "kept" survived on the promoted server, "gone" did not and
  // was replayed (a conditional re-send refused 412: its first request had landed), "unreplayed" did not and has no row.
  const at = (entry: LedgerEntry, t: number): LedgerEntry => ({ ...entry, t })
  const sentBefore = [at(request("kept", 200, true), 1_000), at(request("gone", 200, true), 1_000), at(request("unreplayed", 200, true), 1_000)]
  const replayed = at(request("gone", 412, false, { reissue: "conditional-update" }), 9_000)
  const facts: RunFacts = {
    ledger: [...sentBefore, replayed],
    events: ["kept", "gone", "unreplayed"].map((key) => ({ type: "claim-answer", key, t: 1_000 })),
    rows: [row("kept", "committed"), row("gone", "committed")],
    missedBySweep: [],
    unsettled: [],
    writeStates: new Map([["doc-kept", "committed"], ["doc-gone", "committed"]]),
    integrity: null,
    failover: {
      mode: "async", timelineAfter: 2, crashAt: 5_000, noticed: { to: { timeline: 2 } }, forgotten: ["gone", "unreplayed"], replayed: ["gone"]
    }
  }

  it("does not count as lost what the promoted server forgot, and counts it: applied before the crash, replayed, still without a row", () => {
    const verdict = judge(facts)
    expect(failed(verdict)).toBe(false)
    expect(verdict.forgotten).toEqual({ keys: 2, applied: 2, replayed: 1, unreplayed: 1 })
    // Without the failover's facts, the forgotten key without a row is lost.
    expect(judge({ ...facts, failover: undefined }).violations.lost).toEqual(["unreplayed"])
  })

  it("counts a forgotten edit replayed blind (a plain re-send applied again) as a duplicate", () => {
    const blind = at(request("gone", 200, true), 9_000)
    expect(judge({ ...facts, ledger: [...sentBefore, blind] }).violations.duplicates).toEqual(["gone"])
  })

  it("counts a replayed edit that ends committed without its write ever applied as misreported", () => {
    const neverApplied = [at(request("gone", 503, false), 1_000), at(request("gone", 503, false, { reissue: "conditional-update" }), 9_000)]
    const verdict = judge({ ...facts, ledger: [sentBefore[0]!, sentBefore[2]!, ...neverApplied] })
    expect(verdict.violations.misreported).toEqual(["gone (committed, never applied)"])
    expect(verdict.forgotten.applied).toBe(1)
  })

  it("fails a failover the store did not notice, or noticed on another timeline", () => {
    expect(judge({ ...facts, failover: { ...facts.failover!, noticed: null } }).violations.failover).toEqual(["the store's status shows no failover"])
    expect(judge({ ...facts, failover: { ...facts.failover!, noticed: { to: { timeline: 1 } } } }).violations.failover).toEqual([
      "the store's status shows a failover to timeline 1, the promoted server is on 2"
    ])
  })

  it("fails a synchronous standby that, promoted, lacked something acknowledged", () => {
    const verdict = judge({ ...facts, failover: { ...facts.failover!, mode: "sync" } })
    expect(verdict.violations.failover).toEqual(["the promoted synchronous standby lacked 2 acknowledged keys: gone, unreplayed"])
  })
})

describe("readLines", () => {
  it("skips the torn last line of a killed writer", () => {
    const file = join(mkdtempSync(join(tmpdir(), "soak-lines-")), "events.jsonl")
    writeFileSync(file, `{"type":"a"}\n{"type":"b"}\n{"type":"c`)
    expect(readLines(file)).toEqual([{ type: "a" }, { type: "b" }])
    expect(readLines(`${file}.absent`)).toEqual([])
  })
})

describe("requestFor", () => {
  const update = { operationID: "k", documentID: "d", op: "update", sourceID: "ent", reissueIntent: { kind: "conditional-update", ifMatch: "e1" } }
  const detCreate = { operationID: "k", documentID: "d", op: "create", sourceID: null, reissueIntent: { kind: "deterministic-create", providerID: "p1" } }
  const plainCreate = { operationID: "k", documentID: "d", op: "create", sourceID: null, reissueIntent: { kind: "reconcile" } }

  it("sends a first attempt plainly (an update without ifMatch, a reconcile-only create without an id)", () => {
    expect(requestFor(update, null)).toEqual({ key: "k", documentID: "d", reissue: null, op: "update", entityID: "ent" })
    expect(requestFor(plainCreate, null)).toEqual({ key: "k", documentID: "d", reissue: null, op: "create" })
    expect(requestFor(detCreate, null)).toEqual({ key: "k", documentID: "d", reissue: null, op: "create", providerID: "p1" })
  })

  it("re-sends exactly as the reissue says", () => {
    expect(requestFor(update, { kind: "conditional-update", ifMatch: "e1" })).toEqual({
      key: "k", documentID: "d", reissue: "conditional-update", op: "update", entityID: "ent", ifMatch: "e1"
    })
    expect(requestFor(detCreate, { kind: "deterministic-create", providerID: "p1" })).toEqual({
      key: "k", documentID: "d", reissue: "deterministic-create", op: "create", providerID: "p1"
    })
  })

  it("sends a delete as a delete, first time or re-sent", () => {
    const remove = { operationID: "k", documentID: "d", op: "delete", sourceID: "ent", reissueIntent: { kind: "idempotent-delete" } }
    expect(requestFor(remove, null)).toEqual({ key: "k", documentID: "d", reissue: null, op: "delete", entityID: "ent" })
    expect(requestFor(remove, { kind: "idempotent-delete" })).toEqual({
      key: "k", documentID: "d", reissue: "idempotent-delete", op: "delete", entityID: "ent"
    })
  })
})

describe("storeCall", () => {
  const rejecting = (error: unknown) => async () => {
    const events: Array<Record<string, unknown>> = []
    await expect(storeCall((event) => events.push(event), "claimOperation", () => Promise.reject(error))).rejects.toBeInstanceOf(Aborted)
    return events
  }

  it("reports a rejection without a store tag as untyped", async () => {
    expect(await rejecting(new TypeError("x is undefined"))()).toMatchObject([{ type: "violation", what: "untyped" }])
    expect(await rejecting({ _tag: "SomethingElse" })()).toMatchObject([{ type: "violation", what: "untyped" }])
  })

  it("reports SQLITE_BUSY reaching the caller, and a typed error as typed", async () => {
    const busy = { _tag: "PersistenceError", message: "claim", cause: { code: "SQLITE_BUSY", message: "database is locked" } }
    expect(await rejecting(busy)()).toMatchObject([{ type: "violation", what: "busy" }])
    expect(await rejecting({ _tag: "ConcurrentUpdateExhausted", message: "gave up" })()).toMatchObject([
      { type: "typed-error", tag: "ConcurrentUpdateExhausted" }
    ])
  })

  it("passes an answer through untouched", async () => {
    expect(await storeCall(() => {}, "m", async () => 42)).toBe(42)
  })
})

describe("parseArgs", () => {
  it("reads the options and refuses a bad one by name", () => {
    expect(parseArgs(["--backend", "postgres", "--minutes", "2", "--workers", "3", "--seed", "9"])).toEqual({
      backend: "postgres", seconds: 120, workers: 3, seed: 9, keep: false, minKills: 0, failover: false, sync: false
    })
    expect(parseArgs(["--backend", "postgres", "--failover", "--sync"])).toMatchObject({ failover: true, sync: true })
    expect(() => parseArgs(["--failover"])).toThrow("--failover needs --backend postgres")
    expect(() => parseArgs(["--backend", "postgres", "--sync"])).toThrow("--sync needs --failover")
    expect(parseArgs(["--seconds", "35", "--min-kills", "10"])).toMatchObject({ seconds: 35, minKills: 10 })
    expect(() => parseArgs(["--min-kills", "0"])).toThrow("--min-kills")
    expect(() => parseArgs(["--backend", "mysql"])).toThrow("--backend")
    expect(() => parseArgs(["--seconds", "-1"])).toThrow("--seconds")
    expect(() => parseArgs(["--verbose"])).toThrow("--verbose")
  })
})

describe("the provider", () => {
  it("applies every write through the testkit's model and writes its ledger entries, which judge reads back", async () => {
    const ledgerPath = join(mkdtempSync(join(tmpdir(), "soak-provider-")), "ledger.jsonl")
    const provider = await startProvider({ seed: 1, ledgerPath })
    provider.calm()
    try {
      const keys = ["k-1", "k-2", "k-3", "k-4", "k-5", "k-6"].filter((key) => !isInvalidPayload(key)).slice(0, 3)
      const [update, create, remove] = keys as [string, string, string]
      const seeded = await send(provider.url, "/seed", { entityID: "ent-1", documentID: "seed-1" })
      const etag = (seeded.body as { etag: string }).etag
      const write = (body: Record<string, unknown>) => send(provider.url, "/write", { worker: "w1", token: "tok", documentID: "doc", ...body })
      expect((await write({ key: update, op: "update", entityID: "ent-1", reissue: null })).status).toBe(200)
      // The conditional re-send on the etag the edit was based on: stale now, refused, nothing applied.
      expect((await write({ key: update, op: "update", entityID: "ent-1", ifMatch: etag, reissue: "conditional-update" })).status).toBe(412)
      expect((await write({ key: create, op: "create", providerID: "pid-1", reissue: null })).status).toBe(200)
      expect((await write({ key: create, op: "create", providerID: "pid-1", reissue: "deterministic-create" })).status).toBe(409)
      await send(provider.url, "/seed", { entityID: "ent-2", documentID: "seed-2" })
      expect((await write({ key: remove, op: "delete", entityID: "ent-2", reissue: null })).status).toBe(200)
      expect((await write({ key: remove, op: "delete", entityID: "ent-2", reissue: "idempotent-delete" })).status).toBe(410)
      expect((await send(provider.url, `/lookup?key=${create}`)).body).toEqual({ applied: true, entityID: "pid-1", etag: expect.any(String) })
      expect((await send(provider.url, `/lookup?key=${remove}`)).body).toEqual({ applied: true, entityID: "ent-2", etag: null })
      expect((await send(provider.url, "/lookup?key=never")).body).toEqual({ applied: false })

      const ledger = readLines(ledgerPath) as unknown as ReadonlyArray<LedgerEntry>
      expect(ledger.map((e) => [e.request.key, e.status, e.applied])).toEqual([
        [update, 200, true], [update, 412, false], [create, 200, true], [create, 409, false], [remove, 204, true], [remove, 410, false]
      ])
      expect(provider.model.ledger).toHaveLength(6)
      const facts = { ...clean, ledger, rows: keys.map((key) => row(key, "committed")), events: [] }
      expect(judge(facts).violations.duplicates).toEqual([])
      // A blind second update applies again: the model's check, read back from the file, names it.
      expect((await write({ key: update, op: "update", entityID: "ent-1", reissue: null })).status).toBe(200)
      expect(judge({ ...facts, ledger: readLines(ledgerPath) as unknown as ReadonlyArray<LedgerEntry> }).violations.duplicates).toEqual([update])
    } finally {
      await provider.close()
    }
  })
})
