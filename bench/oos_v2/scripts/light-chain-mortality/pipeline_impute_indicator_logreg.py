# idiom: Pipeline of a ColumnTransformer (median SimpleImputer with add_indicator for creatinine, log1p FunctionTransformer on the light chains, one-hot sex) and LogisticRegression, cross_val_score AUC; intended: valid
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

chains = ["kappa", "lambda"]
plain = ["age", "sample.yr", "flc.grp", "mgus"]
features = chains + ["creatinine"] + plain + ["sex"]

preprocess = ColumnTransformer([
    ("chains", make_pipeline(FunctionTransformer(np.log1p), StandardScaler()), chains),
    ("creatinine", make_pipeline(SimpleImputer(strategy="median", add_indicator=True), StandardScaler()),
     ["creatinine"]),
    ("plain", StandardScaler(), plain),
    ("sex", OneHotEncoder(drop="if_binary"), ["sex"]),
])
model = Pipeline([("prep", preprocess), ("logit", LogisticRegression(C=0.5, max_iter=2000))])

scores = cross_val_score(model, train[features], train["death"], cv=5, scoring="roc_auc")
print("CV AUC: %.4f +/- %.4f" % (scores.mean(), scores.std()))

model.fit(train[features], train["death"])
test_pred = model.predict_proba(test[features])[:, 1]
pd.DataFrame({"id": test["id"], "death": test_pred}).to_csv("submission.csv", index=False)
