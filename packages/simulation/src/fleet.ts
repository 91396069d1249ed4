import type { ClaimOperationInput, ConnectorOperation, DueClaim, PromiseConnectorStore } from "@connector-store/core"
import type { SimClock } from "./clock.js"
import { claimInputOf, claimInputOfRow, operationIndexOf, type PlannedOperation, type SimulationPlan } from "./plan.js"
import type { WorldClient } from "./world.js"
import { driveClaimed, driveWriteBack, type WriteBackContext } from "./writeBack.js"

/** A set of runners sharing one store in one process. */
export interface Fleet {
  /** Stops taking work and waits for every runner to finish what it is doing. */
  readonly stop: () => Promise<void>
}

/** How a fleet is set up. */
export interface FleetOptions {
  readonly store: PromiseConnectorStore<unknown>
  readonly world: WorldClient
  readonly plan: SimulationPlan
  readonly runTag: string
  /** The operations this fleet issues (the user's edits on this device); any fleet may re-drive any. */
  readonly operations: ReadonlyArray<PlannedOperation>
  readonly runners: number
  /** The run's clock (the machine's in a child process). */
  readonly clock: SimClock
  readonly leaseMs: number
  readonly watchDelayMs: number
  /** Runners ignore `claim.reissue` (a deliberately broken runner; see `SimulationOptions.blindResend`). */
  readonly blindResend?: boolean | undefined
  /** Reports an unexpected error of a runner (the runner carries on). */
  readonly onError: (error: unknown) => void
}


interface Job {
  readonly op: PlannedOperation
  readonly input: () => Promise<ClaimOperationInput>
  /** The lease a batch claim already granted, when the job came from one. */
  readonly claim?: DueClaim | undefined
}

/**
 * Starts `runners` concurrent runners and one due sweeper. Runners take a
 * re-drive the sweeper found first (an attempted operation whose lease
 * lapsed or whose backoff or deferral is over), else the next edit of this
 * fleet whose previous edit of the same document has finished. The sweeper
 * lists due work every 50 ms, as a restarted engine would at boot and then
 * periodically.
 */
export const startFleet = (options: FleetOptions): Fleet => {
  const { store, world, plan, clock } = options
  let stopping = false
  const fresh = [...options.operations]
  const redrives = new Map<string, ConnectorOperation>()
  const ctx: WriteBackContext = {
    store,
    world,
    clock,
    leaseMs: options.leaseMs,
    watchDelayMs: options.watchDelayMs,
    blindResend: options.blindResend
  }

  const isFinished = async (index: number): Promise<boolean> => {
    const before = plan.operations[index]!
    const row = await store.getOperation({ callerDID: before.callerDID, operationID: before.operationID })
    return row !== null && row.state !== "attempted"
  }

  // Leased by a batch claim and not yet taken by a runner.
  const batched: Array<Job> = []
  let batchTurn = 0

  const nextJob = async (): Promise<Job | undefined> => {
    const leased = batched.shift()
    if (leased !== undefined) return leased
    // Every other turn a runner takes its re-drives as a worker of a fleet does: a batch of due operations leased to it.
    if (batchTurn++ % 2 === 1) {
      const batch = await store.claimDueOperations({ limit: 2, leaseMs: options.leaseMs })
      batch.finished.forEach(() => world.count("claim.batch-finished"))
      for (const claim of batch.claimed) {
        world.count("claim.batch")
        redrives.delete(claim.operation.operationID)
        const index = operationIndexOf(claim.operation.operationID, options.runTag)
        // Another run's operation: its lease lapses and that run takes it back.
        if (index === undefined) continue
        batched.push({ op: plan.operations[index]!, input: async () => claimInputOfRow(claim.operation), claim })
      }
      const first = batched.shift()
      if (first !== undefined) return first
    }
    for (const [id, row] of redrives) {
      redrives.delete(id)
      const index = operationIndexOf(row.operationID, options.runTag)
      if (index === undefined) continue
      return { op: plan.operations[index]!, input: async () => claimInputOfRow(row) }
    }
    for (const op of fresh.slice(0, 4)) {
      if (op.after !== null && !(await isFinished(op.after))) continue
      // Other runners take edits while this one waited: remove this edit by identity, if it is still here.
      const at = fresh.indexOf(op)
      if (at < 0) continue
      fresh.splice(at, 1)
      return { op, input: async () => claimInputOf(plan.scope, op, await world.knownEtag(op.document.documentID)) }
    }
    return undefined
  }

  const runner = async () => {
    while (!stopping) {
      const job = await nextJob().catch((error: unknown) => {
        options.onError(error)
        return undefined
      })
      if (job === undefined) {
        await clock.sleep(15)
        continue
      }
      try {
        if (job.claim === undefined) await driveWriteBack(ctx, job.op, await job.input())
        else await driveClaimed(ctx, job.op, await job.input(), job.claim)
      } catch (error) {
        world.count("runner.error")
        options.onError(error)
        if (!redrives.has(job.op.operationID)) fresh.unshift(job.op)
      }
    }
  }

  const sweeper = async () => {
    while (!stopping) {
      try {
        const due = await store.listDueOperations(clock.now(), {})
        for (const row of due.operations) {
          if (row.ownerDID === plan.scope.ownerDID) redrives.set(row.operationID, row)
        }
      } catch (error) {
        options.onError(error)
      }
      await clock.sleep(50)
    }
  }

  const running = [clock.spawn(sweeper), ...Array.from({ length: options.runners }, () => clock.spawn(runner))]
  return {
    stop: async () => {
      stopping = true
      await clock.join(Promise.all(running))
    }
  }
}
