"""The fronts: APIs other than chat completions, each a translation onto the one chat path.

A front turns its request into a chat completions request, hands it to the chat path
(`proxy.path`), and turns the chat answer back into its own shapes: the whole answer at once, a
stream event by event, errors in its own form. No repair lives here: everything latchgate does
to a request or an answer happens once, on the chat path, for every front.

`chatstream` is the one piece every front shares: the client's stream that reads the chat
path's events back and hands each chunk to the front's writer.
"""
