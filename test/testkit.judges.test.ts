import {
  judgeCommitWatches,
  judgeDeletes,
  judgeLeases,
  type LeaseCall,
  type SentWrite
} from "@connector-store/testkit"
import { describe, expect, it } from "vitest"

/** The judges on their own, over hand-made calls and rows: what each one reads and names. */

let seq = 0
const call = (actor: string, method: string, token: string | null, outcome: string | null, lease: string | null = null): LeaseCall =>
  ({ seq: ++seq, actor, key: "dev/op-1", method, token, outcome, lease })
const send = (actor: string): SentWrite => ({ seq: ++seq, actor, key: "dev/op-1", what: "an update of E1 (request #1)" })

describe("the lease judges", () => {
  it("pass a claim, a mark sent, a send and a finalize under the claim's token", () => {
    const calls = [call("r1", "claimOperation", null, "claimed", "lease-1"), call("r1", "markOperationSent", "lease-1", "sent")]
    const sends = [send("r1")]
    calls.push(call("r1", "finalizeOperationAndArmWatch", "lease-1", "committed"))
    expect(judgeLeases(calls, sends)).toEqual([])
  })

  it("name a call under a token the runner's latest claim did not hand out, once per key", () => {
    const calls = [
      call("r1", "claimOperation", null, "claimed", "lease-1"),
      call("r1", "claimOperation", null, "claimed", "lease-2"),
      call("r1", "markOperationSent", "lease-1", "lease-lost"),
      call("r1", "recordAttemptFailure", "lease-1", "lease-lost")
    ]
    expect(judgeLeases(calls, [])).toEqual([{
      invariant: "lease-token-from-claim",
      detail: "r1 called markOperationSent on dev/op-1 with lease token lease-1, but its claim handed it lease-2 (answered lease-lost)"
    }])
  })

  it("name a send after lease-lost, after the lease was released, before any mark, and by a runner that never claimed", () => {
    seq = 0
    const lost = [call("r1", "claimOperation", null, "claimed", "lease-1"), call("r1", "markOperationSent", "lease-1", "lease-lost")]
    expect(judgeLeases(lost, [send("r1")]).map((v) => v.detail)).toEqual(["r1 sent an update of E1 (request #1) for dev/op-1 although its markOperationSent answered lease-lost"])
    const released = [call("r1", "claimOperation", null, "claimed", "lease-1"), call("r1", "markOperationSent", "lease-1", "sent"), call("r1", "recordAttemptFailure", "lease-1", "retrying")]
    expect(judgeLeases(released, [send("r1")]).map((v) => v.detail)).toEqual(["r1 sent an update of E1 (request #1) for dev/op-1 although its recordAttemptFailure answered retrying: the lease is released"])
    const unmarked = [call("r1", "claimOperation", null, "claimed", "lease-1")]
    expect(judgeLeases(unmarked, [send("r1")])[0]?.detail).toMatch(/although its claim was never marked sent$/)
    expect(judgeLeases([], [send("r2")])[0]?.detail).toMatch(/although it never claimed the operation$/)
    const busy = [call("r1", "claimOperation", null, "busy")]
    expect(judgeLeases(busy, [send("r1")])[0]?.detail).toMatch(/although its claimOperation answered busy: it holds no lease$/)
  })

  it("pass a send after a claim that marked its request sent itself, and name one after that lease is released", () => {
    const marked = { ...call("r1", "claimOperation", null, "claimed", "lease-1"), markedSent: true }
    expect(judgeLeases([marked], [send("r1")])).toEqual([])
    const released = [{ ...call("r1", "claimOperation", null, "claimed", "lease-1"), markedSent: true }, call("r1", "recordAttemptFailure", "lease-1", "retrying")]
    expect(judgeLeases(released, [send("r1")])[0]?.detail).toMatch(/although its recordAttemptFailure answered retrying: the lease is released$/)
    const lateClaim = [{ ...call("r1", "claimOperation", null, "claimed", "lease-1"), markedSent: true }, call("r1", "claimOperation", null, "claimed", "lease-2")]
    expect(judgeLeases(lateClaim, [send("r1")])[0]?.detail).toMatch(/although its claim was never marked sent$/)
  })

  it("keep a rejected call from changing what the runner holds", () => {
    const calls = [call("r1", "claimOperation", null, "claimed", "lease-1"), call("r1", "markOperationSent", "lease-1", "sent"), call("r1", "finalizeOperationAndArmWatch", "lease-1", null)]
    expect(judgeLeases(calls, [send("r1")])).toEqual([])
  })
})

/** Both commit judges over one run's committed writes, as `checkRunnerLoop` calls them. */
const judges = (...[committed, live, watches]: Parameters<typeof judgeDeletes>) => [...judgeDeletes(committed, live, watches), ...judgeCommitWatches(committed, watches)]

describe("the commit judges", () => {
  const update = { key: "dev/u", op: "update" as const, sourceID: "E1", documentID: "D1" }
  const del = { key: "dev/d", op: "delete" as const, sourceID: "E1", documentID: "D1" }
  const watch = { sourceID: "E1", documentID: "D1", repairGeneration: 0 }

  it("pass a committed delete whose entity is gone and whose watch is retired, and the update it came after", () => {
    expect(judges([{ ...update, committedAt: 1 }, { ...del, committedAt: 2 }], new Set(), [])).toEqual([])
  })

  it("name a committed delete whose entity the provider still has, or whose watch is still there", () => {
    expect(judges([{ ...del, committedAt: 2 }], new Set(["E1"]), []).map((v) => v.invariant)).toEqual(["delete-removed"])
    expect(judges([{ ...del, committedAt: 2 }], new Set(), [watch])[0]?.detail).toMatch(/is a committed delete of E1, but its watch \(g0, D1\) is still there/)
  })

  it("take a watch armed by a commit after the delete as that commit's, and ask it of a commit the delete came before", () => {
    expect(judges([{ ...del, committedAt: 1 }, { ...update, committedAt: 2 }], new Set(), [watch])).toEqual([])
    expect(judges([{ ...del, committedAt: 1 }, { ...update, committedAt: 2 }], new Set(), []).map((v) => v.invariant)).toEqual(["committed-has-watch"])
  })
})
