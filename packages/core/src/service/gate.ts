import { Effect } from "effect"

/**
 * The door every public call goes through. While open it admits calls and
 * counts the ones in flight; `shut` refuses every call from then on and
 * completes when the last admitted call has left, so a store closes only
 * once nothing it admitted is still running, and no call is cut off
 * half-way.
 */
export interface CallGate {
  /** Admits one call: `false` once the gate is shut (the call must not run). */
  readonly enter: () => boolean
  /** One admitted call has ended, however it ended. */
  readonly leave: () => void
  /** Whether the gate is shut. */
  readonly isShut: () => boolean
  /** Shuts the gate; resolves when every admitted call has left. Shutting again waits for the same calls. */
  readonly shut: () => Promise<void>
}

/** A gate that is open, with no call in flight. */
export const makeCallGate = (): CallGate => {
  let shut = false
  let inFlight = 0
  let drained: Promise<void> | undefined
  let wake: (() => void) | undefined
  return {
    enter: () => {
      if (shut) return false
      inFlight++
      return true
    },
    leave: () => {
      inFlight--
      if (inFlight === 0 && wake !== undefined) wake()
    },
    isShut: () => shut,
    shut: () => {
      shut = true
      drained ??= inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => wake = resolve)
      return drained
    }
  }
}

/** `gate.shut()` as an Effect, for a layer's finalizer. */
export const shutGate = (gate: CallGate): Effect.Effect<void> => Effect.promise(() => gate.shut())
