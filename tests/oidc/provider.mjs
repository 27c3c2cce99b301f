// A real OpenID provider for strictcall's tests: oidc-provider (the certified Node.js
// implementation) on 127.0.0.1, issuing access tokens by the client-credentials grant for the
// resources it is told of (RFC 8707), as JWTs signed with the keys it is given (the first key of
// each type signs; all are published in its JWKS), or opaque for the resource named `opaque`,
// with RFC 7662 introspection. Key rotation is a restart with another key file.
//
//   node provider.mjs CONFIG.json
//
// CONFIG: {"port": N, "keys": {"keys": [private JWKs with kid]}, "resources": {"URI": "jwt" |
// "opaque"}, "scopes": "a b", "ttl": seconds, "alg": "ES256", "clients": [{client_id,
// client_secret}]}. Prints `listening PORT` once it serves, and `request METHOD PATH` for every
// request (the tests count its JWKS fetches).
import { readFileSync } from 'node:fs';
import Provider, { errors } from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const issuer = `http://127.0.0.1:${config.port}`;

const provider = new Provider(issuer, {
  jwks: config.keys,
  clients: config.clients.map((client) => ({
    ...client,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_post',
    introspection_endpoint_auth_method: 'client_secret_basic',
    id_token_signed_response_alg: config.alg,
  })),
  clientAuthMethods: ['client_secret_post', 'client_secret_basic'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        const format = config.resources[resource];
        if (format === undefined) {
          throw new errors.InvalidTarget();
        }
        const info = { scope: config.scopes, accessTokenTTL: config.ttl, accessTokenFormat: format };
        if (format === 'jwt') {
          info.jwt = { sign: { alg: config.alg } };
        }
        return info;
      },
    },
  },
});
provider.proxy = false;
provider.use(async (ctx, next) => {
  process.stdout.write(`request ${ctx.method} ${ctx.path}\n`);
  await next();
});

const server = provider.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
