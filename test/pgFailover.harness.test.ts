import pg from "pg"
import { afterAll, describe, expect, it } from "vitest"
import {
  checkpointTimelineOf,
  cleanup,
  cutReplication,
  failoverAvailable,
  healReplication,
  pollUntil,
  promote,
  queryOn,
  startPrimary,
  startReplica,
  systemIdentifierOf,
  timelineOf,
  waitForReplay
} from "./support/pgFailover.js"

const ids = async (url: string): Promise<ReadonlyArray<number>> =>
  (await queryOn<{ id: number }>(url, "SELECT id FROM acknowledged ORDER BY id")).rows.map((row) => row.id)

/** Commits rows `from..to` one autocommit INSERT each: every one acknowledged when its call returns. */
const commitRows = async (url: string, from: number, to: number): Promise<void> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    for (let id = from; id <= to; id++) await client.query("INSERT INTO acknowledged (id) VALUES ($1)", [id])
  } finally {
    await client.end()
  }
}

const range = (from: number, to: number): ReadonlyArray<number> => Array.from({ length: to - from + 1 }, (_, i) => from + i)

describe.runIf(failoverAvailable)("Postgres failover harness", () => {
  afterAll(cleanup)

  it("an asynchronous replica cut off before the primary crashes is promoted without the commits it never received", async () => {
    const primary = await startPrimary()
    const replica = await startReplica(primary, { mode: "async" })
    await queryOn(primary.url, "CREATE TABLE acknowledged (id int PRIMARY KEY)")
    await commitRows(primary.url, 1, 10)
    // A slow link delays the replica without stopping it.
    replica.link.lag(200)
    await commitRows(primary.url, 11, 20)
    await waitForReplay(primary, replica)
    replica.link.lag(0)
    expect(await ids(replica.url)).toEqual(range(1, 20))

    await cutReplication(replica)
    await commitRows(primary.url, 21, 50)
    expect(await ids(primary.url)).toEqual(range(1, 50))
    const systemId = await systemIdentifierOf(primary.url)
    expect(await timelineOf(primary.url)).toBe(1)

    await primary.crash()
    const promoted = await promote(replica)
    expect(await ids(promoted)).toEqual(range(1, 20))
    expect(await timelineOf(promoted)).toBe(2)
    expect(await systemIdentifierOf(promoted)).toBe(systemId)
    // The promoted server takes writes, on its new timeline.
    await commitRows(promoted, 21, 21)
    expect(await ids(promoted)).toEqual(range(1, 21))
  })

  it("a synchronous replica holds every acknowledged commit: cut off, a commit waits for it instead of returning", async () => {
    const primary = await startPrimary()
    const replica = await startReplica(primary, { mode: "sync" })
    await queryOn(primary.url, "CREATE TABLE acknowledged (id int PRIMARY KEY)")
    await commitRows(primary.url, 1, 20)
    await expect(cutReplication(replica)).rejects.toThrow(/synchronous standby/)

    await cutReplication(replica, { hangCommits: true })
    let returned = false
    const waiting = commitRows(primary.url, 21, 21).then(() => {
      returned = true
    })
    const twoSeconds = await Promise.race([waiting.then(() => "returned"), new Promise((done) => setTimeout(() => done("waiting"), 2_000))])
    expect(twoSeconds).toBe("waiting")
    expect(returned).toBe(false)

    await healReplication(replica)
    await pollUntil("the waiting commit to return once its standby is back", async () => (returned ? true : undefined), 20_000)
    await waiting
    await commitRows(primary.url, 22, 30)
    const systemId = await systemIdentifierOf(primary.url)

    await primary.crash()
    const promoted = await promote(replica, { checkpointed: true })
    expect(await checkpointTimelineOf(promoted)).toBe(2)
    expect(await ids(promoted)).toEqual(range(1, 30))
    expect(await timelineOf(promoted)).toBe(2)
    expect(await systemIdentifierOf(promoted)).toBe(systemId)
    // Promoted, it is no one's standby and waits for none.
    await commitRows(promoted, 31, 31)
    expect(await ids(promoted)).toEqual(range(1, 31))
  })
})
