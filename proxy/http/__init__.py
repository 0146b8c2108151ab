"""The aiohttp application: routes, auth, request bodies, OpenAI-shaped errors, admin routes,
running and draining.
"""
