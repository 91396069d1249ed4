import type { Effect } from "effect"
import type { ConnectorStore } from "../service/ConnectorStore.js"
import type { PromiseAnswer } from "./methods.js"

/**
 * Runs one call of the Effect API as a Promise of its answer as the Promise
 * API gives it (an `Option` as its value or `null`), rejecting with the tagged error.
 */
export type PromiseCall = <A, E>(use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) => Promise<PromiseAnswer<A>>
