import type { Lease, OperationKey } from "@connector-store/promise"
import type { LeaseLoss, WorkerStore } from "./options.js"

/**
 * Keeps a drive's lease while its provider call runs: renews it every third of its length and, once a renewal is refused or
 * the lease runs out on the store's clock without one, aborts `controller` and says why (`lost`). Stopped by `stop()`.
 */
export class LeaseKeeper {
  private timer: ReturnType<typeof setTimeout> | undefined
  private stopped = false
  private loss: LeaseLoss | undefined
  private expiresAt: number

  constructor(
    private readonly store: WorkerStore,
    private readonly key: OperationKey,
    private readonly lease: Lease,
    private readonly leaseMs: number,
    private readonly controller: AbortController,
    private readonly onError: (error: unknown) => void
  ) {
    this.expiresAt = lease.expiresAt
    this.schedule()
  }

  /** Why the lease was lost, once it was. */
  get lost(): LeaseLoss | undefined {
    // The clock alone ends a lease: a keeper whose renewals stalled must not count on it.
    if (this.loss === undefined && !this.stopped && this.store.now() >= this.expiresAt) this.lose("expired")
    return this.loss
  }

  /** Stops renewing. */
  stop(): void {
    this.stopped = true
    clearTimeout(this.timer)
  }

  private lose(loss: LeaseLoss): void {
    if (this.loss !== undefined) return
    this.loss = loss
    this.stop()
    this.controller.abort(new Error(`the lease was lost (${loss})`))
  }

  private schedule(): void {
    if (this.stopped) return
    const untilExpiry = this.expiresAt - this.store.now()
    const wait = Math.max(1, Math.min(Math.floor(this.leaseMs / 3), untilExpiry))
    this.timer = setTimeout(() => void this.tick(), wait)
    this.timer.unref?.()
  }

  private async tick(): Promise<void> {
    if (this.stopped) return
    if (this.store.now() >= this.expiresAt) return this.lose("expired")
    try {
      const renewed = await this.store.renewOperationLease(this.key, { leaseToken: this.lease.token, leaseMs: this.leaseMs })
      if (this.stopped) return
      if (renewed.outcome !== "renewed") return this.lose("renewal-refused")
      this.expiresAt = renewed.lease.expiresAt
    } catch (error) {
      // A renewal that failed may be tried again while the lease lasts.
      this.onError(error)
      if (this.stopped) return
    }
    this.schedule()
  }
}
