import { openConnectorStore } from "@connector-store/sql-adapter"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startCommitDropProxy, type CommitDropProxy } from "./faults.proxy.js"
import { expectTyped, rejectionOf } from "./faults.support.js"
import { freshPrefix, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// A store opening while its server goes away (a failover, a restart): the connection of its schema's transaction dies
// at the COMMIT. The open rejects with a typed PersistenceError, as every call does, never with the driver's own error.
describe.runIf(pgAvailable)("an open whose schema transaction loses its connection at COMMIT, on Postgres", () => {
  let proxy: CommitDropProxy
  let viaProxy: URL

  beforeAll(async () => {
    const direct = await pgDatabaseForFile()
    const target = new URL(direct)
    proxy = await startCommitDropProxy({ host: target.hostname, port: Number(target.port || 5432) })
    viaProxy = new URL(direct)
    viaProxy.port = String(proxy.port)
  })

  afterAll(async () => {
    await proxy?.close()
  })

  it("rejects with a typed PersistenceError naming openConnectorStore", async () => {
    proxy.armCommitDrop()
    const error = await rejectionOf(openConnectorStore({ url: viaProxy.toString(), tablePrefix: freshPrefix(), readWinner: () => null }))
    expect(proxy.dropped()).toBe(1)
    expectTyped(error, "openConnectorStore")
    expect(error).toMatchObject({ _tag: "PersistenceError", method: "openConnectorStore" })
  })
})
