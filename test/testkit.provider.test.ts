import { FakeProvider, ProviderError, providerWithLedger } from "@connector-store/testkit"
import { describe, expect, it } from "vitest"

const write = { callerDID: "did:example:device", operationID: "op-1", sourceID: "evt-1", documentID: "doc-1", payloadHash: "v1" }

describe("the testkit's provider", () => {
  it("keeps every request in its ledger and names a write applied twice outside a sanctioned reissue", async () => {
    const provider = new FakeProvider({ fates: ["502-after-apply"] })
    provider.seed("evt-1", "v0", "doc-1")
    const client = provider.client("runner1")
    await expect(client.update(write)).rejects.toMatchObject({ status: 502 })
    await client.update(write) // the blind re-send
    expect(provider.ledger.map((e) => [e.n, e.fate, e.applied, e.status])).toEqual([[1, "502-after-apply", true, 502], [2, "ok", true, 200]])
    expect(provider.check()).toEqual([expect.objectContaining({ invariant: "no-double-apply", detail: expect.stringContaining("did:example:device/op-1 applied 2 times") })])
  })

  it("counts a sanctioned conditional re-send apart, and refuses a stale one with 412", async () => {
    const provider = new FakeProvider({ fates: ["applied-no-answer"] })
    const etag = provider.seed("evt-1", "v0", "doc-1").etag
    const client = provider.client("runner1", (request) => request.ifMatch === etag ? "conditional-update" : null)
    await expect(client.update(write, { ifMatch: etag })).rejects.toMatchObject({ status: "timeout" })
    await expect(client.update(write, { ifMatch: etag })).rejects.toMatchObject({ status: 412 })
    expect(provider.check()).toEqual([])
  })

  it("answers a delete of a deleted entity 410: applied once, not a duplicate", async () => {
    const provider = new FakeProvider({ fates: ["applied-no-answer"] })
    provider.seed("evt-1", "v0", "doc-1")
    const client = provider.client("runner1")
    await expect(client.delete(write)).rejects.toMatchObject({ status: "timeout" })
    const again = await client.delete(write).catch((e: unknown) => e)
    expect(again).toBeInstanceOf(ProviderError)
    expect((again as ProviderError).status).toBe(410)
    expect(provider.ledger.map((e) => [e.applied, e.alreadyGone])).toEqual([[true, false], [false, true]])
    expect(await client.get("evt-1")).toBeNull()
    expect(provider.check()).toEqual([])
  })

  it("goes offline, rate-limits with a Retry-After, and lets the grant expire until renewed", async () => {
    const provider = new FakeProvider({ fates: ["ok", "429", "grant-expires"], retryAfterMs: 250 })
    provider.seed("evt-1", "v0", "doc-1")
    const client = provider.client("runner1")
    provider.goOffline(1)
    await expect(client.update(write)).rejects.toMatchObject({ status: "offline" })
    await expect(client.update(write)).resolves.toMatchObject({ digest: "v1" })
    await expect(client.update(write)).rejects.toMatchObject({ status: 429, retryAfterMs: 250 })
    await expect(client.update(write)).rejects.toMatchObject({ status: 401 })
    await expect(client.update(write)).rejects.toMatchObject({ status: 401 })
    provider.renewGrant()
    await expect(client.create({ ...write, operationID: "op-2" }, { id: "evt-2" })).resolves.toMatchObject({ id: "evt-2" })
    await expect(client.create({ ...write, operationID: "op-2" }, { id: "evt-2" })).rejects.toMatchObject({ status: 409 })
    expect(provider.ledger.map((e) => e.arrival)).toEqual(["offline", "arrived", "arrived", "arrived", "arrived", "arrived", "arrived"])
  })

  it("names a sanctioned reissue that applied on top of an earlier apply, but not one a late plain request landed on", async () => {
    const onTop = new FakeProvider({ fates: ["502-after-apply"] })
    onTop.seed("evt-1", "v0", "doc-1")
    const client = onTop.client("runner1", (request) => request.ifMatch === undefined ? null : "conditional-update")
    await expect(client.update(write)).rejects.toMatchObject({ status: 502 })
    // A re-send labelled a reissue, but conditional on the etag it just wrote: the provider takes it.
    await client.update(write, { ifMatch: onTop.entities.get("evt-1")!.etag })
    expect(onTop.ledger.map((e) => [e.applied, e.appliedAs])).toEqual([[true, 1], [true, 2]])
    expect(onTop.check()).toEqual([{
      invariant: "no-double-apply",
      detail: "did:example:device/op-1 applied again by the sanctioned reissue #2 update by runner1 (conditional-update), on top of #1 update by runner1"
    }])
    expect(onTop.check({ startedOver: new Set(["did:example:device/op-1"]) })).toEqual([])

    // The same two applies, the plain request landing after the reissue: the network's late delivery, no double apply.
    const late = providerWithLedger(onTop.ledger.map((e) => ({ ...e, appliedAs: 3 - e.appliedAs! })))
    expect(late.check()).toEqual([])
  })

  it("rebuilds a provider from a ledger read back from a file, whose check() judges it and whose new requests follow it", async () => {
    const provider = new FakeProvider()
    provider.seed("evt-1", "v0", "doc-1")
    const client = provider.client("runner1")
    await client.update(write)
    await client.update(write)
    const readBack = JSON.parse(JSON.stringify(provider.ledger)) as typeof provider.ledger
    const rebuilt = providerWithLedger(readBack)
    expect(rebuilt.check()).toEqual(provider.check())
    expect(rebuilt.check()).toHaveLength(1)
    expect(rebuilt.entities.size).toBe(0)
    rebuilt.seed("evt-2", "v0")
    await rebuilt.client("runner2").delete({ ...write, operationID: "op-2", sourceID: "evt-2" })
    expect(rebuilt.ledger.map((e) => [e.n, e.appliedAs])).toEqual([[1, 1], [2, 2], [3, 3]])
    expect(providerWithLedger(readBack.slice(0, 1)).check()).toEqual([])
  })
})
