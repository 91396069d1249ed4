/** The typed surface of cluster.mjs the tests use. */
export interface FloatingProxy {
  /** The port it listens on, on 127.0.0.1. */
  readonly port: number
  /** Closes its connections and refuses new ones. */
  readonly cut: () => void
  /** Sends new connections to `port` and closes the open ones. */
  readonly switchTo: (port: number) => void
  readonly close: () => Promise<void>
}
/** A TCP proxy on 127.0.0.1 to `port` (one address in front of whichever server is primary). */
export declare const proxy: (port: number) => Promise<FloatingProxy>
