extension Catalog {
    /// The built-in catalog, served when neither `ONSIDE_UPSTREAM_URL` nor `GATEWAY_CATALOG` is set.
    public static let sample: Catalog = {
        do {
            return try Catalog(json: Array(sampleJSON.utf8))
        } catch {
            // The text is a constant checked by the test suite, so failing here is a build defect.
            preconditionFailure("the embedded sample catalog is invalid: \(error)")
        }
    }()

    /// The built-in catalog's file text, in the format described on `Catalog`; a
    /// starting point for a `GATEWAY_CATALOG` file.
    ///
    /// Twelve products: subscriptions renewing weekly, every 7 days, monthly and
    /// yearly, with introductory and discount offers; one-time purchases; prices
    /// in DE, FR, US, GB, JP and CH (JPY without decimals). `family_monthly` is not
    /// sold in JP or CH and `sticker_pack_cats` only in US, GB and JP.
    public static let sampleJSON: String = #"""
    {
      "defaultLanguage": "en",
      "products": [
        {
          "id": "premium_monthly",
          "iconUrl": "https://cdn.example.com/premium.png",
          "localizations": {
            "en": { "title": "Premium", "description": "All features, billed monthly" },
            "de": { "title": "Premium", "description": "Alle Funktionen, monatlich abgerechnet" },
            "fr": { "title": "Premium", "description": "Toutes les fonctionnalités, facturé chaque mois" }
          },
          "prices": {
            "DE": { "amount": "4.99", "currency": "EUR" },
            "FR": { "amount": "4.99", "currency": "EUR" },
            "US": { "amount": "4.99", "currency": "USD" },
            "GB": { "amount": "4.49", "currency": "GBP" },
            "JP": { "amount": "600", "currency": "JPY" },
            "CH": { "amount": "5.00", "currency": "CHF" }
          },
          "subscription": {
            "period": "P1M",
            "groupId": "premium",
            "introductoryOffer": {
              "period": "P1W",
              "prices": {
                "DE": { "amount": "0.00", "currency": "EUR" },
                "FR": { "amount": "0.00", "currency": "EUR" },
                "US": { "amount": "0.00", "currency": "USD" },
                "GB": { "amount": "0.00", "currency": "GBP" },
                "JP": { "amount": "0", "currency": "JPY" },
                "CH": { "amount": "0.00", "currency": "CHF" }
              }
            },
            "discountOffer": null
          }
        },
        {
          "id": "premium_yearly",
          "iconUrl": "https://cdn.example.com/premium.png",
          "localizations": {
            "en": { "title": "Premium Yearly", "description": "All features, billed yearly" },
            "de": { "title": "Premium Jährlich", "description": "Alle Funktionen, jährlich abgerechnet" },
            "fr": { "title": "Premium annuel", "description": "Toutes les fonctionnalités, facturé chaque année" }
          },
          "prices": {
            "DE": { "amount": "39.99", "currency": "EUR" },
            "FR": { "amount": "39.99", "currency": "EUR" },
            "US": { "amount": "39.99", "currency": "USD" },
            "GB": { "amount": "34.99", "currency": "GBP" },
            "JP": { "amount": "4800", "currency": "JPY" },
            "CH": { "amount": "40.00", "currency": "CHF" }
          },
          "subscription": {
            "period": "P1Y",
            "groupId": "premium",
            "introductoryOffer": null,
            "discountOffer": {
              "period": "P1Y",
              "prices": {
                "DE": { "amount": "29.99", "currency": "EUR" },
                "FR": { "amount": "29.99", "currency": "EUR" },
                "US": { "amount": "29.99", "currency": "USD" },
                "GB": { "amount": "24.99", "currency": "GBP" },
                "JP": { "amount": "3600", "currency": "JPY" }
              }
            }
          }
        },
        {
          "id": "premium_weekly",
          "iconUrl": "https://cdn.example.com/premium.png",
          "localizations": {
            "en": { "title": "Premium Weekly", "description": "All features, billed weekly" },
            "de": { "title": "Premium Wöchentlich", "description": "Alle Funktionen, wöchentlich abgerechnet" },
            "fr": { "title": "Premium hebdomadaire", "description": "Toutes les fonctionnalités, facturé chaque semaine" }
          },
          "prices": {
            "DE": { "amount": "1.99", "currency": "EUR" },
            "FR": { "amount": "1.99", "currency": "EUR" },
            "US": { "amount": "1.99", "currency": "USD" },
            "GB": { "amount": "1.79", "currency": "GBP" },
            "JP": { "amount": "250", "currency": "JPY" },
            "CH": { "amount": "2.00", "currency": "CHF" }
          },
          "subscription": { "period": "P1W", "groupId": "premium" }
        },
        {
          "id": "boost_7days",
          "iconUrl": "https://cdn.example.com/boost.png",
          "localizations": {
            "en": { "title": "Boost", "description": "Faster sync, renewed every 7 days" },
            "de": { "title": "Boost", "description": "Schnellere Synchronisierung, alle 7 Tage verlängert" },
            "fr": { "title": "Boost", "description": "Synchronisation plus rapide, renouvelé tous les 7 jours" }
          },
          "prices": {
            "DE": { "amount": "0.99", "currency": "EUR" },
            "FR": { "amount": "0.99", "currency": "EUR" },
            "US": { "amount": "0.99", "currency": "USD" },
            "GB": { "amount": "0.99", "currency": "GBP" },
            "JP": { "amount": "120", "currency": "JPY" },
            "CH": { "amount": "1.00", "currency": "CHF" }
          },
          "subscription": { "period": "P7D", "groupId": "boost", "introductoryOffer": null, "discountOffer": null }
        },
        {
          "id": "family_monthly",
          "iconUrl": "https://cdn.example.com/family.png",
          "localizations": {
            "en": { "title": "Family", "description": "Premium for up to six people, billed monthly" },
            "de": { "title": "Familie", "description": "Premium für bis zu sechs Personen, monatlich abgerechnet" }
          },
          "prices": {
            "DE": { "amount": "7.99", "currency": "EUR" },
            "FR": { "amount": "7.99", "currency": "EUR" },
            "US": { "amount": "7.99", "currency": "USD" },
            "GB": { "amount": "6.99", "currency": "GBP" }
          },
          "subscription": {
            "period": "P1M",
            "groupId": "family",
            "introductoryOffer": {
              "period": "P3M",
              "prices": {
                "DE": { "amount": "2.99", "currency": "EUR" },
                "FR": { "amount": "2.99", "currency": "EUR" },
                "US": { "amount": "2.99", "currency": "USD" },
                "GB": { "amount": "2.49", "currency": "GBP" }
              }
            }
          }
        },
        {
          "id": "cloud_storage_quarterly",
          "iconUrl": null,
          "localizations": {
            "en": { "title": "Cloud Storage", "description": "200 GB of storage, billed every 3 months" },
            "de": { "title": "Cloud-Speicher", "description": "200 GB Speicher, alle 3 Monate abgerechnet" }
          },
          "prices": {
            "DE": { "amount": "5.99", "currency": "EUR" },
            "FR": { "amount": "5.99", "currency": "EUR" },
            "US": { "amount": "5.99", "currency": "USD" },
            "GB": { "amount": "4.99", "currency": "GBP" },
            "JP": { "amount": "800", "currency": "JPY" },
            "CH": { "amount": "6.00", "currency": "CHF" }
          },
          "subscription": { "period": "P3M", "groupId": null }
        },
        {
          "id": "coins_100",
          "iconUrl": "https://cdn.example.com/coins.png",
          "localizations": {
            "en": { "title": "100 Coins", "description": "A handful of coins" },
            "de": { "title": "100 Münzen", "description": "Eine Handvoll Münzen" },
            "fr": { "title": "100 pièces", "description": "Une poignée de pièces" }
          },
          "prices": {
            "DE": { "amount": "0.99", "currency": "EUR" },
            "FR": { "amount": "0.99", "currency": "EUR" },
            "US": { "amount": "0.99", "currency": "USD" },
            "GB": { "amount": "0.89", "currency": "GBP" },
            "JP": { "amount": "120", "currency": "JPY" },
            "CH": { "amount": "1.00", "currency": "CHF" }
          }
        },
        {
          "id": "coins_550",
          "iconUrl": "https://cdn.example.com/coins.png",
          "localizations": {
            "en": { "title": "550 Coins", "description": "A pouch of coins, 10% extra" },
            "de": { "title": "550 Münzen", "description": "Ein Beutel Münzen, 10 % extra" },
            "fr": { "title": "550 pièces", "description": "Une bourse de pièces, 10 % en plus" }
          },
          "prices": {
            "DE": { "amount": "4.99", "currency": "EUR" },
            "FR": { "amount": "4.99", "currency": "EUR" },
            "US": { "amount": "4.99", "currency": "USD" },
            "GB": { "amount": "4.49", "currency": "GBP" },
            "JP": { "amount": "600", "currency": "JPY" },
            "CH": { "amount": "5.00", "currency": "CHF" }
          }
        },
        {
          "id": "coins_1200",
          "iconUrl": "https://cdn.example.com/coins.png",
          "localizations": {
            "en": { "title": "1200 Coins", "description": "A chest of coins, 20% extra" },
            "de": { "title": "1200 Münzen", "description": "Eine Truhe Münzen, 20 % extra" },
            "fr": { "title": "1200 pièces", "description": "Un coffre de pièces, 20 % en plus" }
          },
          "prices": {
            "DE": { "amount": "9.99", "currency": "EUR" },
            "FR": { "amount": "9.99", "currency": "EUR" },
            "US": { "amount": "9.99", "currency": "USD" },
            "GB": { "amount": "8.99", "currency": "GBP" },
            "JP": { "amount": "1200", "currency": "JPY" },
            "CH": { "amount": "10.00", "currency": "CHF" }
          }
        },
        {
          "id": "remove_ads",
          "localizations": {
            "en": { "title": "Remove Ads", "description": "Hide all ads for good" },
            "en-GB": { "title": "Remove Adverts", "description": "Hide all adverts for good" },
            "de": { "title": "Werbung entfernen", "description": "Blendet alle Werbung dauerhaft aus" },
            "fr": { "title": "Supprimer les publicités", "description": "Masque toutes les publicités pour de bon" }
          },
          "prices": {
            "DE": { "amount": "2.99", "currency": "EUR" },
            "FR": { "amount": "2.99", "currency": "EUR" },
            "US": { "amount": "2.99", "currency": "USD" },
            "GB": { "amount": "2.49", "currency": "GBP" },
            "JP": { "amount": "400", "currency": "JPY" },
            "CH": { "amount": "3.00", "currency": "CHF" }
          }
        },
        {
          "id": "pro_lifetime",
          "iconUrl": "https://cdn.example.com/pro.png",
          "localizations": {
            "en": { "title": "Pro Lifetime", "description": "Every Pro feature, paid once" },
            "de": { "title": "Pro auf Lebenszeit", "description": "Alle Pro-Funktionen, einmal bezahlt" },
            "fr": { "title": "Pro à vie", "description": "Toutes les fonctions Pro, payées une fois" }
          },
          "prices": {
            "DE": { "amount": "49.99", "currency": "EUR" },
            "FR": { "amount": "49.99", "currency": "EUR" },
            "US": { "amount": "49.99", "currency": "USD" },
            "GB": { "amount": "44.99", "currency": "GBP" },
            "JP": { "amount": "6000", "currency": "JPY" },
            "CH": { "amount": "50.00", "currency": "CHF" }
          }
        },
        {
          "id": "sticker_pack_cats",
          "iconUrl": "https://cdn.example.com/stickers-cats.png",
          "localizations": {
            "en": { "title": "Cat Stickers", "description": "Twenty-four cat stickers for your chats" }
          },
          "prices": {
            "US": { "amount": "1.99", "currency": "USD" },
            "GB": { "amount": "1.79", "currency": "GBP" },
            "JP": { "amount": "250", "currency": "JPY" }
          }
        }
      ]
    }
    """#
}
