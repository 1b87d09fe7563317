# idiom: multinomial logit with the statsmodels formula API (smf.mnlogit) as in an econometrics notebook, Q() quoting for the dotted column names; intended: crash (ModuleNotFoundError: statsmodels is not installed in the runtime)
import pandas as pd
import statsmodels.formula.api as smf

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

parties = sorted(train["vote"].unique())
train["vote_code"] = train["vote"].map({p: i for i, p in enumerate(parties)})

formula = ("vote_code ~ age + Q('economic.cond.national') + Q('economic.cond.household') + Blair + Hague"
           " + Kennedy + Europe * Q('political.knowledge') + C(gender)")
result = smf.mnlogit(formula, data=train).fit(method="newton", maxiter=100, disp=False)
print(result.summary())

proba = result.predict(test)
proba.columns = parties
proba.insert(0, "id", test["id"])
proba.to_csv("submission.csv", index=False)
