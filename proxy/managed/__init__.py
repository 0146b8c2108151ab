"""llama-servers that latchgate starts and supervises itself (managed upstreams).

`latchgate --model m.gguf`, or a `managed` table on an upstream, turns a GGUF file into an
endpoint: latchgate finds the llama-server binary (`binary`), checks the model file (`gguf`),
starts the server with the flags tool calling needs (`command`) on a free loopback port, relays
its log (`logline`), restarts it when it dies (`process`), and, for several models, starts each
on its first request and stops the idle ones within a bound on how many run at once (`fleet`).
Its own Prometheus metrics are re-exported on latchgate's (`exposition`). `check` validates all
of it before latchgate starts, so bad input is one line and exit status 2.
"""
