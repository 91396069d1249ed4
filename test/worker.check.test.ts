import { type CheckEdit, checkRunnerLoop, type ProviderClient, ProviderError, REQUEST_FATES, type RunnerLoop } from "@connector-store/testkit"
import { type Connector, driveClaim } from "@connector-store/worker"
import { describe, expect, it } from "vitest"

// The worker's drive of one claim (what each of its slots runs) under
// checkRunnerLoop: crashes at every step, every fate the fake provider
// has, runners interleaved; and the check failing it once a guard is
// broken (a re-send that ignores the claim's reissue).

/** The project's connector over the check's provider client, for `edit`. */
const connectorOver = (client: ProviderClient, edit: CheckEdit, options: { readonly blind?: boolean } = {}): Connector => {
  const providerID = edit.reissueIntent.kind === "deterministic-create" ? edit.reissueIntent.providerID : undefined
  return {
    send: async (operation, { reissue }) => {
      const safe = options.blind === true ? null : reissue
      if (operation.op === "delete") return client.delete(edit)
      if (operation.op === "create") return client.create(edit, { id: providerID })
      return client.update(edit, { ifMatch: safe?.kind === "conditional-update" ? safe.ifMatch : undefined })
    },
    lookup: async () => {
      const found = await client.get(providerID ?? edit.sourceID!)
      return found === null ? null : { id: found.id, etag: found.etag, digest: found.digest, entity: found }
    },
    classify: (error) => {
      const status = error instanceof ProviderError ? error.status : null
      if (status === "offline") return { kind: "offline" }
      if (status === 401) return { kind: "auth", httpStatus: 401 }
      if (status === 429) return { kind: "retryable", httpStatus: 429, retryAfterMs: (error as ProviderError).retryAfterMs ?? 0 }
      if (typeof status === "number" && status >= 400 && status < 500) return { kind: "permanent", httpStatus: status }
      return typeof status === "number" ? { kind: "retryable", httpStatus: status } : { kind: "unknown" }
    }
  }
}

/** A runner loop: claim the edit's key, then the worker's drive of the claim. */
const workerLoop = (options: { readonly blind?: boolean } = {}): RunnerLoop => async (store, client, edit) => {
  const claim = await store.claimOperation(edit)
  if (claim.outcome !== "claimed") return claim.outcome
  return (await driveClaim(store, edit.connectorName, connectorOver(client, edit, options), claim, { verifyAfterMs: 300 })).outcome
}

describe("the worker's drive under checkRunnerLoop", () => {
  it("holds for creates, updates and deletes under every fate of the fake provider", async () => {
    const report = await checkRunnerLoop(workerLoop(), { fates: REQUEST_FATES, numRuns: 60, seed: 50 })
    expect(report.runs).toBe(60)
  }, 120_000)

  it("fails once the drive re-sends blind, ignoring the claim's reissue", async () => {
    await expect(checkRunnerLoop(workerLoop({ blind: true }), { kinds: ["update"], fates: ["applied-no-answer", "502-after-apply", "ok"], numRuns: 100, seed: 5 }))
      .rejects.toThrow(/applied|twice|reissue/i)
  }, 120_000)
})
