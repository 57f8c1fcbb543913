import Foundation
import OnsideProductsClient

// Fetch two products for Germany from a gateway (the first argument, or a local one).
let gateway = Client(gatewayURL: URL(string: CommandLine.arguments.dropFirst().first ?? "http://127.0.0.1:8080")!)
let call = Components.Schemas.ProductsFetchRequest(
    jsonrpc: ._2_0, method: .products_fetch,
    params: .init(productIdentifiers: ["premium_monthly", "retired_pack"], countryCode: "DE"), id: .NumberId(1))
switch try await gateway.rpc(body: .json(.RpcRequest(.ProductsFetchRequest(call)))).ok.body.json {
case .RpcResponse(.ProductsFetchSuccess(let success)):
    for product in success.result.products { print(product.localizedTitle, product.price.value, product.price.currencyCode) }
    print("unknown:", success.result.invalidProductIdentifiers)
case let other: print("not a success:", other)
}
