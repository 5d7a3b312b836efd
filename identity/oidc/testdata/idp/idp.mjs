// A test identity provider: oidc-provider with its development login
// pages (any login, any password). The login names the account; an
// account whose login starts with "admin" is in the group
// "astrabox-admins". Configured by the environment:
//   IDP_PORT       port on 127.0.0.1 to listen on
//   IDP_CLIENTS    JSON array of {client_id, client_secret, redirect_uris}
// A client whose id ends in "-short" gets ID tokens that live 1 second.
// Prints "listening <issuer>" once it serves.
import Provider from 'oidc-provider';

const port = Number(process.env.IDP_PORT);
const issuer = `http://127.0.0.1:${port}`;
const clients = JSON.parse(process.env.IDP_CLIENTS).map((c) => ({
  ...c,
  grant_types: ['authorization_code'],
  response_types: ['code'],
  token_endpoint_auth_method: 'client_secret_basic',
}));

const provider = new Provider(issuer, {
  clients,
  cookies: { keys: ['astrabox-test-idp-cookie-key'] },
  pkce: { required: () => true },
  conformIdTokenClaims: false,
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
  scopes: ['openid', 'email', 'profile', 'groups'],
  features: { devInteractions: { enabled: true } },
  ttl: {
    IdToken: (ctx, token, client) => (client.clientId.endsWith('-short') ? 1 : 3600),
  },
  async findAccount(ctx, id) {
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          email: `${id}@example.com`,
          email_verified: true,
          name: `Test ${id}`,
          groups: id.startsWith('admin') ? ['astrabox-admins', 'staff'] : ['staff'],
        };
      },
    };
  },
});
provider.proxy = false;
provider.listen(port, '127.0.0.1', () => {
  console.log(`listening ${issuer}`);
});
